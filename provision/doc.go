// Package provision is hactl's SSH transport: one [Client] per host (one TCP
// connection, reused for every step), public-key authentication from a key
// file, host keys checked against an OpenSSH known_hosts file, remote commands
// ([Client.Run]) that fail with a typed [*CommandError], atomic file uploads
// over SFTP ([Client.Upload]) and a bounded fan-out helper ([ForEach]) whose
// per-host errors are aggregated with go-multierror.
//
// Every function that does I/O takes a [context.Context]; its deadline is the
// per-step deadline. Errors are wrapped with %w so errors.Is / errors.As see
// the typed errors ([*HostKeyError], [*CommandError], [*UploadError],
// [*HostError]) and context.Canceled / context.DeadlineExceeded through any
// number of layers.
//
// All remote commands go through one private function that builds the remote
// command line (today `env LC_ALL=C /bin/sh -c '<command>'`, run as the login
// user, normally root); privilege escalation for non-root users (sudo) is meant
// to be added there.
package provision
