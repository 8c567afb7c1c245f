//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package provision

import "os"

// lockFile is a no-op where flock is unavailable; appends still go through a
// single write on an O_APPEND descriptor.
func lockFile(*os.File) error { return nil }
