//go:build !unix

package fault

import "os/exec"

// ownProcessGroup does nothing where process groups are not available: cancellation kills the
// shell only.
func ownProcessGroup(*exec.Cmd) {}
