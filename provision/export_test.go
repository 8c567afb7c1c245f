package provision

import "encoding/base64"

// IsDeadConnection is isDeadConnection for the package's external tests.
var IsDeadConnection = isDeadConnection

// SetDropInDirs replaces the drop-in directories the facts command searches (tests point them at
// temp dirs) and returns the function putting them back.
func SetDropInDirs(dirs ...string) (restore func()) {
	old := dropInDirs
	dropInDirs = dirs
	return func() { dropInDirs = old }
}

// EncodeBase64 is for tests building facts output by hand.
func EncodeBase64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
