package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hactl/hactl/internal/atomicfile"
)

// File modes used in the state dir, as kubeadm uses for its PKI: private keys are readable by the owner
// only, certificates by everyone, directories are private.
const (
	KeyFileMode  os.FileMode = 0o600
	CertFileMode os.FileMode = 0o644
	DirMode      os.FileMode = 0o700
)

// writeFileAtomic writes data to path with the given mode (see atomicfile.WriteFile).
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	return atomicfile.WriteFile(path, data, mode)
}

// ensureDir creates dir (and parents) with DirMode.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create dir %s: %w", dir, err)
	}
	return nil
}

// exists reports whether path exists; errors other than "not exist" are returned.
func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
}

// moveAside renames path (if it exists) to "<path>.<UTC timestamp>.old" in the same directory; files
// are never deleted. A numeric suffix is added if that name is taken.
func moveAside(path string, now time.Time) error {
	ok, err := exists(path)
	if err != nil || !ok {
		return err
	}
	base := fmt.Sprintf("%s.%s.old", path, now.UTC().Format("20060102T150405Z"))
	target := base
	for i := 1; ; i++ {
		taken, err := exists(target)
		if err != nil {
			return err
		}
		if !taken {
			break
		}
		target = fmt.Sprintf("%s.%d", base, i)
	}
	if err := os.Rename(path, target); err != nil {
		return fmt.Errorf("move aside %s: %w", path, err)
	}
	return atomicfile.SyncDir(filepath.Dir(path))
}
