//! The sysfs topology reader on fake sysfs trees.

use std::fs;
use std::path::{Path, PathBuf};

use nest_topology::Topology;
use nest_topology::read_sysfs_topology;

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nest-topology-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, format!("{text}\n")).unwrap();
}

/// A Linux-like tree for `sockets x cores x 2 threads`, numbered like
/// `Topology::regular` (first threads, then second threads), one L3 and one
/// NUMA node per socket; package ids are deliberately sparse (0 and 3).
fn fake_sysfs(root: &Path, sockets: u32, cores: u32) {
    let total = sockets * cores;
    // Both threads of every core of `socket`: its L3 and its NUMA node.
    let socket_cpus = |socket: u32| {
        format!(
            "{}-{},{}-{}",
            socket * cores,
            socket * cores + cores - 1,
            total + socket * cores,
            total + socket * cores + cores - 1
        )
    };
    let cpu_root = root.join("sys/devices/system/cpu");
    for cpu in 0..total * 2 {
        let core = cpu % total;
        let socket = core / cores;
        let dir = cpu_root.join(format!("cpu{cpu}"));
        write(
            &dir.join("topology/physical_package_id"),
            &(socket * 3).to_string(),
        );
        write(&dir.join("topology/core_id"), &(core % cores).to_string());
        write(
            &dir.join("topology/thread_siblings_list"),
            &format!("{core},{}", core + total),
        );
        write(&dir.join("cache/index0/level"), "1");
        write(
            &dir.join("cache/index0/shared_cpu_list"),
            &format!("{core},{}", core + total),
        );
        write(&dir.join("cache/index3/level"), "3");
        write(
            &dir.join("cache/index3/shared_cpu_list"),
            &socket_cpus(socket),
        );
    }
    for socket in 0..sockets {
        write(
            &root.join(format!("sys/devices/system/node/node{socket}/cpulist")),
            &socket_cpus(socket),
        );
    }
}

#[test]
fn two_socket_smt_machine_matches_regular_numbering() {
    let root = tempdir("topo2x4x2");
    fake_sysfs(&root, 2, 4);
    let topo = read_sysfs_topology(&root).unwrap();
    assert_eq!(topo, Topology::regular(2, 4, 2));
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn missing_numa_and_cache_info_fall_back() {
    let root = tempdir("topo-min");
    for cpu in 0..2 {
        let dir = root.join(format!("sys/devices/system/cpu/cpu{cpu}/topology"));
        write(&dir.join("physical_package_id"), "0");
        write(&dir.join("thread_siblings_list"), &cpu.to_string());
    }
    // cpu3 present but offline (no topology/), cpu2 absent altogether.
    fs::create_dir_all(root.join("sys/devices/system/cpu/cpu3")).unwrap();
    let topo = read_sysfs_topology(&root).unwrap();
    assert_eq!(topo.nr_cpus(), 4);
    assert_eq!(topo.nr_sockets(), 1);
    let cores: Vec<u32> = topo.cpus.iter().map(|c| c.core).collect();
    assert_eq!(cores, vec![0, 1, 3, 2]);
    assert!(topo.cpus.iter().all(|c| c.node == 0));
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn missing_tree_is_a_clear_error() {
    let root = tempdir("topo-none");
    let err = read_sysfs_topology(&root).unwrap_err();
    assert!(format!("{err:#}").contains("cannot list CPUs"), "{err:#}");
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn this_machine_reads() {
    let topo = read_sysfs_topology(Path::new("/")).unwrap();
    assert!(topo.nr_cpus() >= 1);
}
