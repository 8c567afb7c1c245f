package provision

// IsDeadConnection is isDeadConnection for the package's external tests.
var IsDeadConnection = isDeadConnection
