//! The guest's initramfs: static busybox, the 9p modules and a two-stage
//! init (src/init.sh, src/stage2.sh). Built in memory, cached by content
//! hash under `<cache>/initramfs/`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cpio::Cpio;
use crate::kernel::{GuestKernel, cache_dir};

/// Modules needed to mount the host's root over virtio-9p; their
/// dependencies (netfs, 9pnet) come from `modules.dep`.
pub const MODULES: [&str; 2] = ["9pnet_virtio", "9p"];

/// Built into current kernels, modules in older ones (Debian 11's 5.10
/// has `CONFIG_VIRTIO_PCI=m`; without it 9p finds no virtio channel):
/// loaded first when the kernel has them as modules.
pub const MODULES_IF_MODULAR: [&str; 1] = ["virtio_pci"];

const INIT: &str = include_str!("init.sh");
const STAGE2: &str = include_str!("stage2.sh");

/// Builds the initramfs for `kernel` (or reuses the cached copy) and
/// returns its path.
pub fn build(kernel: &GuestKernel) -> Result<PathBuf> {
    let bytes = archive(kernel)?;
    let dir = writable_cache_dir()?;
    let path = dir.join(format!("{:016x}.cpio", fnv1a(&bytes)));
    if !path.is_file() {
        let tmp = dir.join(format!(".{}.tmp", std::process::id()));
        fs::write(&tmp, &bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, &path).with_context(|| format!("cannot create {}", path.display()))?;
    }
    Ok(path)
}

fn archive(kernel: &GuestKernel) -> Result<Vec<u8>> {
    let mut cpio = Cpio::default();
    for dir in ["bin", "dev", "proc", "sys", "newroot", "modules"] {
        cpio.dir(dir, 0o755);
    }
    cpio.char_dev("dev/console", 0o600, 5, 1);
    cpio.file("bin/busybox", 0o755, &read_busybox()?);
    cpio.file("init", 0o755, INIT.as_bytes());
    cpio.file("stage2", 0o644, STAGE2.as_bytes());
    let mut order = String::new();
    for module in load_order(&kernel.modules, &MODULES)? {
        let name = format!("{}.ko", module_name(&module));
        cpio.file(
            &format!("modules/{name}"),
            0o644,
            &read_module(&kernel.modules.join(&module))?,
        );
        order.push_str(&name);
        order.push('\n');
    }
    cpio.file("modules/order", 0o644, order.as_bytes());
    Ok(cpio.finish())
}

fn read_busybox() -> Result<Vec<u8>> {
    let path = std::env::var_os("NEST_BUSYBOX")
        .map_or_else(|| PathBuf::from("/bin/busybox"), PathBuf::from);
    fs::read(&path).with_context(|| {
        format!(
            "cannot read {} (static busybox for the guest): run scripts/setup.sh to install busybox-static",
            path.display()
        )
    })
}

/// `kernel/fs/9p/9p.ko.xz` -> `9p`.
fn module_name(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.split(".ko").next().unwrap_or(file)
}

/// Module paths (relative to the module tree) to load, dependencies
/// first: [`MODULES_IF_MODULAR`] that the kernel has, then `wanted`, less
/// those built into the kernel (`modules.builtin`, made by `make
/// modules_install`; the kernels scripts/guest-kernel.sh builds have 9p
/// built in).
pub fn load_order(modules_dir: &Path, wanted: &[&str]) -> Result<Vec<String>> {
    let dep_file = modules_dir.join("modules.dep");
    let text = fs::read_to_string(&dep_file).with_context(|| {
        format!(
            "cannot read {}: re-run scripts/guest-kernel.sh",
            dep_file.display()
        )
    })?;
    let builtin = fs::read_to_string(modules_dir.join("modules.builtin")).unwrap_or_default();
    let builtin: Vec<&str> = builtin.lines().map(module_name).collect();
    let modular: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|name| !builtin.iter().any(|b| same_module(b, name)))
        .collect();
    modules_to_load(&parse_modules_dep(&text), &modular)
}

/// [`MODULES_IF_MODULAR`] that `deps` has, then `wanted`, resolved.
fn modules_to_load(deps: &HashMap<String, Vec<String>>, wanted: &[&str]) -> Result<Vec<String>> {
    let names: Vec<&str> = MODULES_IF_MODULAR
        .into_iter()
        .filter(|name| find_module(deps, name).is_some())
        .chain(wanted.iter().copied())
        .collect();
    resolve(deps, &names)
}

/// Module names compare with `-` and `_` alike.
fn same_module(a: &str, b: &str) -> bool {
    a.replace('-', "_") == b.replace('-', "_")
}

/// The path of module `name` (`-` and `_` alike) in `deps`.
fn find_module<'a>(deps: &'a HashMap<String, Vec<String>>, name: &str) -> Option<&'a String> {
    deps.keys()
        .find(|path| same_module(module_name(path), name))
}

/// `modules.dep` as module path -> dependency paths.
pub fn parse_modules_dep(text: &str) -> HashMap<String, Vec<String>> {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(module, deps)| {
            let deps = deps.split_whitespace().map(str::to_string).collect();
            (module.trim().to_string(), deps)
        })
        .collect()
}

/// Depth-first: every module after its dependencies, each once.
pub fn resolve(deps: &HashMap<String, Vec<String>>, wanted: &[&str]) -> Result<Vec<String>> {
    let mut order = Vec::new();
    for name in wanted {
        let Some(path) = find_module(deps, name) else {
            bail!(
                "kernel module {name} not found in modules.dep: the guest kernel lacks 9p support"
            );
        };
        visit(deps, path, &mut order);
    }
    Ok(order)
}

fn visit(deps: &HashMap<String, Vec<String>>, module: &str, order: &mut Vec<String>) {
    if order.iter().any(|m| m == module) {
        return;
    }
    for dep in deps.get(module).into_iter().flatten() {
        visit(deps, dep, order);
    }
    order.push(module.to_string());
}

/// Reads a module, decompressing it (busybox insmod cannot).
fn read_module(path: &Path) -> Result<Vec<u8>> {
    let tool = match path.extension().and_then(|e| e.to_str()) {
        Some("xz") => "xz",
        Some("zst") => "zstd",
        Some("gz") => "gzip",
        _ => return fs::read(path).with_context(|| format!("cannot read {}", path.display())),
    };
    let out = Command::new(tool)
        .arg("-dc")
        .arg(path)
        .output()
        .with_context(|| {
            format!(
                "cannot run {tool} to decompress {}: run scripts/setup.sh",
                path.display()
            )
        })?;
    if !out.status.success() {
        bail!(
            "{tool} -dc {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}

fn writable_cache_dir() -> Result<PathBuf> {
    let preferred = cache_dir().join("initramfs");
    if fs::create_dir_all(&preferred).is_ok() && is_writable(&preferred) {
        return Ok(preferred);
    }
    let fallback = std::env::temp_dir().join("nest-cache").join("initramfs");
    fs::create_dir_all(&fallback)
        .with_context(|| format!("cannot create {}", fallback.display()))?;
    Ok(fallback)
}

fn is_writable(dir: &Path) -> bool {
    tempfile::tempfile_in(dir).is_ok()
}

/// 64-bit FNV-1a: stable across Rust versions, good enough for a cache key.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP: &str = "\
kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/netfs/netfs.ko.xz
kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/netfs/netfs.ko.xz
kernel/net/9p/9pnet.ko.xz: kernel/fs/netfs/netfs.ko.xz
kernel/fs/netfs/netfs.ko.xz:
";

    #[test]
    fn resolves_dependencies_first_once() {
        let order = resolve(&parse_modules_dep(DEP), &MODULES).unwrap();
        let names: Vec<_> = order.iter().map(|p| module_name(p)).collect();
        assert_eq!(names, ["netfs", "9pnet", "9pnet_virtio", "9p"]);
    }

    #[test]
    fn virtio_pci_is_loaded_first_only_where_it_is_a_module() {
        let built_in = modules_to_load(&parse_modules_dep(DEP), &MODULES).unwrap();
        assert_eq!(built_in.len(), 4);
        let modular = format!(
            "{DEP}kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio.ko\n\
             kernel/drivers/virtio/virtio.ko:\n"
        );
        let order = modules_to_load(&parse_modules_dep(&modular), &MODULES).unwrap();
        let names: Vec<_> = order.iter().map(|p| module_name(p)).collect();
        assert_eq!(
            names,
            [
                "virtio",
                "virtio_pci",
                "netfs",
                "9pnet",
                "9pnet_virtio",
                "9p"
            ]
        );
    }

    #[test]
    fn built_in_modules_are_not_loaded() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("modules.dep"), "").unwrap();
        fs::write(
            dir.path().join("modules.builtin"),
            "kernel/net/9p/9pnet.ko\nkernel/net/9p/9pnet_virtio.ko\nkernel/fs/9p/9p.ko\n",
        )
        .unwrap();
        assert_eq!(
            load_order(dir.path(), &MODULES).unwrap(),
            Vec::<String>::new()
        );
        fs::write(dir.path().join("modules.builtin"), "kernel/fs/9p/9p.ko\n").unwrap();
        let err = load_order(dir.path(), &MODULES).unwrap_err();
        assert!(err.to_string().contains("9pnet_virtio"), "{err}");
    }

    #[test]
    fn missing_module_is_an_error() {
        let err = resolve(&parse_modules_dep(DEP), &["virtiofs"]).unwrap_err();
        assert!(err.to_string().contains("virtiofs"));
    }

    #[test]
    fn names_modules() {
        assert_eq!(
            module_name("kernel/net/9p/9pnet_virtio.ko.xz"),
            "9pnet_virtio"
        );
        assert_eq!(module_name("a/b.ko"), "b");
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
