// Package provision is hactl's SSH transport: a [Dialer] holding the
// credentials (key files, ssh-agent keys, passphrases and the sudo password,
// each loaded or asked once) and, optionally, one shared connection to a
// bastion; one [Client] per host (one SSH connection, reused for every step);
// host keys checked against OpenSSH known_hosts files; remote commands
// ([Client.Run]) that fail with a typed [*CommandError]; atomic file uploads
// over SFTP ([Client.Upload]); and a bounded fan-out helper ([ForEach]) whose
// per-host errors are aggregated with go-multierror.
//
// Every function that does I/O takes a [context.Context]; its deadline is the
// per-step deadline. Errors are wrapped with %w so errors.Is / errors.As see
// the typed errors ([*HostKeyError], [*AuthError], [*PrivilegeError],
// [*CommandError], [*UploadError], [*HostError]) and context.Canceled /
// context.DeadlineExceeded through any number of layers.
//
// Privilege: when a client connects, one command probes whether the login
// user is root, has passwordless sudo, or needs a sudo password (and checks
// that password), and finds the host's sftp-server. All remote commands, and
// the SFTP server used for uploads, then go through one private function that
// builds the command line, run as is for root and through sudo otherwise:
//
//	env LC_ALL=C /bin/sh -c '<command>'
//	sudo -n -- env LC_ALL=C /bin/sh -c '<command>'
//	sudo -k -S -p '' -- env LC_ALL=C /bin/sh -c '<command>'
//
// A sudo password only ever travels as the first line of the command's
// standard input: never on a command line, and it is scrubbed from stderr
// and errors.
package provision
