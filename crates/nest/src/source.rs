//! Debian source packages, for workloads that configure or build real
//! software (`nest bench`, `nest validate`): fetched once with `apt-get
//! source` into the cache
//! (`$NEST_CACHE/src/<package>`, default `/var/cache/nest`, the layout
//! `scripts/bench/configure.sh` reads too) and copied afresh for every run.
//!
//! The fetch uses a private apt configuration in `$NEST_CACHE/apt-src`
//! with one `deb-src` line for bookworm, so the system's apt sources and
//! state are never touched. A tree is complete once `.complete` is in it;
//! a half-fetched one is fetched again.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";
/// The distribution whose sources are fetched (the machines run Debian 12).
const DISTRIBUTION: &str = "bookworm";

/// `$NEST_CACHE`, else `/var/cache/nest`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("NEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/nest"))
}

/// Where `package`'s unpacked tree is (or will be).
pub fn tree(package: &str) -> PathBuf {
    cache_dir().join("src").join(package)
}

fn is_complete(tree: &Path) -> bool {
    tree.join(".complete").exists()
}

/// Is `package`'s tree in the cache, complete?
pub fn is_cached(package: &str) -> bool {
    is_complete(&tree(package))
}

/// The unpacked tree of `package`, fetched first if it is not cached.
pub fn fetch(package: &str) -> Result<PathBuf> {
    let tree = tree(package);
    if is_complete(&tree) {
        eprintln!("nest: source of {package} cached in {}", tree.display());
        return Ok(tree);
    }
    eprintln!(
        "nest: fetching the source of {package} (private apt configuration in {})",
        apt_dir().display()
    );
    download_and_unpack(package, &tree).with_context(|| {
        format!(
            "cannot fetch the source of {package} into {} (apt's messages are above: is \
             '{package}' a source package of Debian {DISTRIBUTION}, and is the mirror \
             reachable? A guest has no network: fetch on the host, `nest bench fetch \
             {package}`, and the guest sees the host's cache)",
            tree.display()
        )
    })?;
    eprintln!("nest: source of {package} cached in {}", tree.display());
    Ok(tree)
}

fn apt_dir() -> PathBuf {
    cache_dir().join("apt-src")
}

/// apt's configuration: only our sources, lists and cache; no dpkg status.
fn apt_conf(apt: &Path) -> String {
    let a = apt.display();
    format!(
        "#clear APT::Update::Post-Invoke;\n\
         #clear APT::Update::Post-Invoke-Success;\n\
         #clear DPkg::Post-Invoke;\n\
         Dir::Etc::SourceList \"{a}/etc/sources.list\";\n\
         Dir::Etc::SourceParts \"{a}/etc/sources.list.d\";\n\
         Dir::Etc::Preferences \"{a}/etc/preferences\";\n\
         Dir::Etc::PreferencesParts \"{a}/etc/preferences.d\";\n\
         Dir::State::Lists \"{a}/lists\";\n\
         Dir::State::status \"/dev/null\";\n\
         Dir::Cache \"{a}/cache\";\n\
         Dir::Cache::pkgcache \"\";\n\
         Dir::Cache::srcpkgcache \"\";\n\
         Acquire::Languages \"none\";\n\
         Acquire::IndexTargets::deb::DEP-11::DefaultEnabled \"false\";\n\
         APT::Architectures {{ \"amd64\"; }};\n"
    )
}

fn sources_list() -> String {
    let mirror = std::env::var("NEST_DEBIAN_MIRROR").unwrap_or_else(|_| DEFAULT_MIRROR.into());
    format!("deb-src [signed-by={KEYRING}] {mirror} {DISTRIBUTION} main\n")
}

/// Run `program args` in `dir`, its output on our stderr.
fn run(dir: &Path, program: &str, args: &[&str]) -> Result<()> {
    let status = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("cannot run {program} (apt-get install dpkg-dev)"))?;
    if !status.success() {
        bail!("{program} {} failed ({status})", args.join(" "));
    }
    Ok(())
}

fn download_and_unpack(package: &str, tree: &Path) -> Result<()> {
    if !Path::new(KEYRING).exists() {
        bail!("{KEYRING} missing: apt-get install debian-archive-keyring");
    }
    let apt = apt_dir();
    for dir in ["etc/sources.list.d", "etc/preferences.d", "lists/partial"] {
        std::fs::create_dir_all(apt.join(dir)).with_context(|| {
            format!(
                "cannot write to {}: run as root or set NEST_CACHE",
                cache_dir().display()
            )
        })?;
    }
    std::fs::create_dir_all(apt.join("cache/archives/partial"))?;
    std::fs::write(apt.join("etc/sources.list"), sources_list())?;
    std::fs::write(apt.join("apt.conf"), apt_conf(&apt))?;
    let conf = apt.join("apt.conf");
    let conf = conf.to_str().context("the cache path is not UTF-8")?;
    run(&apt, "apt-get", &["-q", "-c", conf, "update"])?;

    let src = tree.parent().context("a source tree has a parent")?;
    let work = src.join(format!(".work-{package}"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let_apt_write(&work)?;
    run(
        &work,
        "apt-get",
        &["-q", "-c", conf, "source", "--download-only", package],
    )?;
    let dsc = std::fs::read_dir(&work)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "dsc"))
        .with_context(|| format!("apt-get source left no .dsc of {package}"))?;
    let dsc_arg = dsc.display().to_string();
    run(&work, "dpkg-source", &["-x", &dsc_arg, "tree"])?;
    let _ = std::fs::remove_dir_all(tree);
    std::fs::rename(work.join("tree"), tree)?;
    if let Some(name) = dsc.file_name() {
        std::fs::rename(&dsc, src.join(name))?;
    }
    std::fs::remove_dir_all(&work)?;
    std::fs::write(tree.join(".complete"), "")?;
    Ok(())
}

/// apt-get downloads as the `_apt` user when it runs as root: let it
/// write into `dir` (as `chown _apt` would).
fn let_apt_write(dir: &Path) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    // SAFETY: the name is a NUL-terminated literal; the entry is read
    // before any other getpw* call could overwrite it.
    let uid = unsafe {
        let entry = libc::getpwnam(c"_apt".as_ptr());
        if entry.is_null() {
            return Ok(());
        }
        (*entry).pw_uid
    };
    std::os::unix::fs::chown(dir, Some(uid), None)
        .with_context(|| format!("cannot give {} to _apt", dir.display()))
}

/// A fresh copy of `tree` at `to` (`cp -a`: modes, times and links kept,
/// so make sees the tree as the package ships it).
pub fn copy_tree(tree: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let status = Command::new("cp")
        .arg("-a")
        .arg(tree)
        .arg(to)
        .status()
        .context("cannot run cp")?;
    if !status.success() {
        bail!(
            "cannot copy {} to {} ({status})",
            tree.display(),
            to.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_is_confined_to_the_cache() {
        let conf = apt_conf(Path::new("/c/apt-src"));
        assert!(conf.contains("Dir::Etc::SourceList \"/c/apt-src/etc/sources.list\";"));
        assert!(conf.contains("Dir::State::status \"/dev/null\";"));
        assert!(conf.contains("APT::Architectures { \"amd64\"; };"));
        assert!(sources_list().starts_with("deb-src [signed-by="));
    }

    #[test]
    fn a_tree_is_cached_only_once_complete() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_complete(dir.path()));
        std::fs::write(dir.path().join(".complete"), "").unwrap();
        assert!(is_complete(dir.path()));
    }

    #[test]
    fn copies_keep_modes() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(tree.join("configure"), "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            tree.join("configure"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let copy = dir.path().join("runs/r1");
        copy_tree(&tree, &copy).unwrap();
        let mode = std::fs::metadata(copy.join("configure"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
    }
}
