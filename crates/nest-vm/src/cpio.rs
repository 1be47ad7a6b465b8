//! A minimal writer for the `newc` cpio format the kernel unpacks as an
//! initramfs. Timestamps are zero so equal content gives equal bytes.

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFCHR: u32 = 0o020000;

/// An archive built in memory.
#[derive(Debug, Default)]
pub struct Cpio {
    bytes: Vec<u8>,
    next_ino: u32,
}

impl Cpio {
    pub fn dir(&mut self, path: &str, perm: u32) {
        self.entry(path, S_IFDIR | perm, 0, b"");
    }

    pub fn file(&mut self, path: &str, perm: u32, data: &[u8]) {
        self.entry(path, S_IFREG | perm, 0, data);
    }

    pub fn char_dev(&mut self, path: &str, perm: u32, major: u32, minor: u32) {
        self.entry(path, S_IFCHR | perm, (major << 8) | minor, b"");
    }

    /// Appends the trailer and returns the archive.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, 0, b"");
        self.bytes
    }

    fn entry(&mut self, path: &str, mode: u32, rdev: u32, data: &[u8]) {
        self.next_ino += 1;
        let name_len = path.len() + 1;
        let fields = [
            self.next_ino,
            mode,
            0, // uid
            0, // gid
            if mode & S_IFDIR != 0 { 2 } else { 1 },
            0, // mtime
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev >> 8,
            rdev & 0xff,
            name_len as u32,
            0, // check
        ];
        self.bytes.extend_from_slice(b"070701");
        for field in fields {
            self.bytes
                .extend_from_slice(format!("{field:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(path.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_newc_headers_and_padding() {
        let mut cpio = Cpio::default();
        cpio.file("init", 0o755, b"abc");
        let bytes = cpio.finish();
        assert!(bytes.starts_with(b"070701"));
        assert_eq!(&bytes[14..22], b"000081ed"); // regular file, 0755
        assert_eq!(&bytes[54..62], b"00000003"); // size
        assert_eq!(&bytes[110..115], b"init\0");
        assert_eq!(&bytes[116..119], b"abc"); // name padded to 116
        assert_eq!(bytes.len() % 4, 0);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("TRAILER!!!"));
    }
}
