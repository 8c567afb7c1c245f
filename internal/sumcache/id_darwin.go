package sumcache

import (
	"fmt"
	"io/fs"
	"syscall"
)

// identity is device:inode:size:mtime:ctime in nanoseconds ("" when the platform gives none).
func identity(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d.%09d:%d.%09d", st.Dev, st.Ino, st.Size, st.Mtimespec.Sec, st.Mtimespec.Nsec, st.Ctimespec.Sec, st.Ctimespec.Nsec)
}
