package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File modes used in the state dir, as kubeadm uses for its PKI: private keys are readable by the owner
// only, certificates by everyone, directories are private.
const (
	KeyFileMode  os.FileMode = 0o600
	CertFileMode os.FileMode = 0o644
	DirMode      os.FileMode = 0o700
)

// writeFileAtomic writes data to path with the given mode so that readers see either the old file or
// the complete new one: it writes a temp file in the same directory (created 0600, so a key is never
// readable by others even briefly), fsyncs it, sets the mode, renames it over path and fsyncs the
// directory.
func writeFileAtomic(path string, data []byte, mode os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
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
	return syncDir(filepath.Dir(path))
}
