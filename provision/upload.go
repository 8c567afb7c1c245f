package provision

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/hactl/hactl/internal/shell"
)

// cleanupTimeout bounds the removal of temporary files after a failed or
// cancelled upload (it runs even when the upload's context is done).
const cleanupTimeout = 10 * time.Second

// File is one file for [Client.Upload].
type File struct {
	// Path is the absolute, clean remote path, e.g. "/etc/etcd/pki/ca.crt".
	Path string
	// Mode is the permission bits (setuid, setgid and sticky allowed);
	// zero means 0644.
	Mode os.FileMode
	// Owner and Group are user and group names (or numeric ids) on the host;
	// empty means "root".
	Owner, Group string
	// Content is the file's content. Leave it nil to stream from Reader
	// instead.
	Content []byte
	// Reader supplies exactly Size bytes when Content is nil; it is read
	// once, sequentially, and not closed. Use it for large files (binaries)
	// so they are streamed, not buffered.
	Reader io.Reader
	// Size is the number of bytes to read from Reader (ignored with Content).
	Size int64
	// SHA256 is the expected hex SHA-256 of the content. Empty means it is
	// computed while uploading. When set, an upload whose content does not
	// match fails and leaves the existing file untouched.
	SHA256 string
}

// UploadError is returned by [Client.Upload]. Path is the file concerned, or a
// comma-separated list when a step of the batch failed as a whole (e.g. the
// ownership/checksum command). Err is the cause; it may be a *CommandError.
type UploadError struct {
	Host, Step, Path string
	Err              error
}

func (e *UploadError) Error() string {
	detail := ""
	if e.Err != nil {
		detail = e.Err.Error()
	}
	var ce *CommandError
	if errors.As(e.Err, &ce) && ce.Host == e.Host && ce.Step == e.Step {
		detail = ce.detail()
	}
	return fmt.Sprintf("host %s: step %s: upload %s: %s", e.Host, e.Step, e.Path, detail)
}

func (e *UploadError) Unwrap() error { return e.Err }

// ChecksumMismatchError is wrapped by an [*UploadError] when a file's content
// does not have the expected SHA-256 (both hex).
type ChecksumMismatchError struct {
	// Where is "remote": the uploaded temporary file does not match File.SHA256
	// (or the hash of what was read here when File.SHA256 is empty). Content
	// read here that differs from File.SHA256 shows as a remote mismatch.
	Where     string
	Want, Got string
}

func (e *ChecksumMismatchError) Error() string {
	return fmt.Sprintf("%s sha256 mismatch: want %s, got %s", e.Where, e.Want, e.Got)
}

// pending is one file being uploaded.
type pending struct {
	f    File
	tmp  string // temporary file, in the target's directory
	sum  string // expected hex sha256
	mode uint32 // unix mode bits for chmod
}

// Upload writes files to the host atomically, as root: each file is streamed
// over SFTP (on this client's connection; for a non-root user the host's
// sftp-server runs through sudo, see [Client.Privilege]) to a temporary file in its target directory
// ".<base>.hactl-tmp-<random>", created 0600; parent directories are created
// with mode 0755. Then one remote command sets owner, group and mode of all
// temporary files and prints their SHA-256, which is checked against
// File.SHA256 (or the hash computed while sending). Only when every file is
// verified is each renamed into place (POSIX rename, atomic per file). So a
// reader of a target path sees the old file or the complete new one, never a
// partial one; a failure before the renames leaves every target untouched. A
// failure during the renames (rare: e.g. the connection drops) can leave the
// batch partially applied, each file still whole.
//
// On any failure the temporary files are removed and an [*UploadError] naming
// host, step and path is returned; it wraps [*ChecksumMismatchError], a
// [*CommandError], an SFTP error, [ErrNoSFTPServer], or the context's error.
// ctx bounds the whole upload.
func (c *Client) Upload(ctx context.Context, step string, files []File) (err error) {
	if len(files) == 0 {
		return nil
	}
	uerr := func(p string, err error) error {
		return &UploadError{Host: c.target.Name, Step: step, Path: p, Err: err}
	}
	all := make([]string, len(files))
	for i, f := range files {
		all[i] = f.Path
	}
	allPaths := strings.Join(all, ", ")

	batch := make([]*pending, 0, len(files))
	seen := map[string]bool{}
	for _, f := range files {
		p, err := preparePending(f)
		if err != nil {
			return uerr(f.Path, err)
		}
		if seen[f.Path] {
			return uerr(f.Path, errors.New("path given more than once"))
		}
		seen[f.Path] = true
		batch = append(batch, p)
	}

	sc, closeSFTP, err := c.openSFTP(ctx)
	if err != nil {
		return uerr(allPaths, err)
	}
	defer closeSFTP()

	var created []string // temporary files that exist remotely
	defer func() {
		if err != nil && len(created) > 0 {
			c.removeTemps(ctx, sc, created)
		}
	}()

	dirs := map[string]bool{}
	for _, p := range batch {
		dir := path.Dir(p.f.Path)
		if !dirs[dir] {
			if err := mkdirAll(sc, dir); err != nil {
				return uerr(p.f.Path, fmt.Errorf("create directory %s: %w", dir, ctxOr(ctx, err)))
			}
			dirs[dir] = true
		}
		if err := c.send(ctx, sc, p, &created); err != nil {
			return uerr(p.f.Path, err)
		}
	}

	// One command for the whole batch: ownership, mode, checksums.
	var script strings.Builder
	script.WriteString("set -e\n")
	tmps := make([]string, len(batch))
	for i, p := range batch {
		q := shell.Quote(p.tmp)
		fmt.Fprintf(&script, "chown -- %s %s\nchmod -- %04o %s\n", shell.Quote(p.f.Owner+":"+p.f.Group), q, p.mode, q)
		tmps[i] = q
	}
	script.WriteString("sha256sum -- " + strings.Join(tmps, " ") + "\n")
	res, err := c.Run(ctx, step, script.String())
	if err != nil {
		return uerr(allPaths, err)
	}
	sums, err := parseSHA256Sum(res.Stdout, len(batch))
	if err != nil {
		return uerr(allPaths, err)
	}
	for i, p := range batch {
		if sums[i] != p.sum {
			return uerr(p.f.Path, &ChecksumMismatchError{Where: "remote", Want: p.sum, Got: sums[i]})
		}
	}

	if err := ctx.Err(); err != nil {
		return uerr(allPaths, context.Cause(ctx))
	}
	if _, ok := sc.HasExtension("posix-rename@openssh.com"); !ok {
		// Plain SFTP rename refuses to replace a file; fall back to mv(1).
		var mv strings.Builder
		mv.WriteString("set -e\n")
		for _, p := range batch {
			fmt.Fprintf(&mv, "mv -f -- %s %s\n", shell.Quote(p.tmp), shell.Quote(p.f.Path))
		}
		if _, err := c.Run(ctx, step, mv.String()); err != nil {
			return uerr(allPaths, err)
		}
		created = nil
		return nil
	}
	for _, p := range batch {
		if err := sc.PosixRename(p.tmp, p.f.Path); err != nil {
			return uerr(p.f.Path, fmt.Errorf("rename %s into place: %w", p.tmp, ctxOr(ctx, err)))
		}
		created = created[1:] // renamed in the order created
	}
	return nil
}

// preparePending validates f, applies defaults and picks the temp name.
func preparePending(f File) (*pending, error) {
	if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
		return nil, errors.New("path must be absolute and clean")
	}
	if strings.ContainsAny(f.Path, "\x00\n") {
		return nil, errors.New("path contains a NUL or newline")
	}
	if f.Content == nil && f.Reader == nil {
		return nil, errors.New("neither Content nor Reader is set")
	}
	if f.Content != nil && f.Reader != nil {
		return nil, errors.New("both Content and Reader are set")
	}
	if f.Content == nil && f.Size < 0 {
		return nil, fmt.Errorf("negative size %d", f.Size)
	}
	if f.SHA256 != "" {
		b, err := hex.DecodeString(f.SHA256)
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("SHA256 %q is not a hex SHA-256", f.SHA256)
		}
		f.SHA256 = strings.ToLower(f.SHA256)
	}
	if f.Mode&^(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
		return nil, fmt.Errorf("mode %s is not a plain file mode", f.Mode)
	}
	if f.Mode == 0 {
		f.Mode = 0o644
	}
	if f.Owner == "" {
		f.Owner = "root"
	}
	if f.Group == "" {
		f.Group = "root"
	}
	mode := uint32(f.Mode.Perm())
	if f.Mode&os.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if f.Mode&os.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if f.Mode&os.ModeSticky != 0 {
		mode |= 0o1000
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(f.Path), "."+path.Base(f.Path)+".hactl-tmp-"+hex.EncodeToString(rnd[:]))
	return &pending{f: f, tmp: tmp, sum: f.SHA256, mode: mode}, nil
}

// send streams p's content to its temporary file and records the file in
// *created. It sets p.sum when File.SHA256 was empty.
func (c *Client) send(ctx context.Context, sc *sftp.Client, p *pending, created *[]string) error {
	f, err := sc.OpenFile(p.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("create %s: %w", p.tmp, ctxOr(ctx, err))
	}
	*created = append(*created, p.tmp)
	closed := false
	defer func() {
		if !closed {
			_ = f.Close()
		}
	}()
	// Private until verified: the content may be a key.
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("chmod %s: %w", p.tmp, ctxOr(ctx, err))
	}
	src, size := p.f.Reader, p.f.Size
	if p.f.Content != nil {
		src, size = bytes.NewReader(p.f.Content), int64(len(p.f.Content))
	}
	// With File.SHA256 given, the host's sha256sum of the copy is the check; hashing here too would
	// only spend a core per stream (a restore ships one snapshot to every member at once).
	r := &hashingReader{ctx: ctx, r: src, remaining: size}
	if p.sum == "" {
		r.h = sha256.New()
	}
	n, err := f.ReadFrom(r)
	if err != nil {
		return fmt.Errorf("write %s: %w", p.tmp, ctxOr(ctx, err))
	}
	if n != size {
		return fmt.Errorf("write %s: reader ended after %d of %d bytes: %w", p.tmp, n, size, io.ErrUnexpectedEOF)
	}
	if _, ok := sc.HasExtension("fsync@openssh.com"); ok {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", p.tmp, ctxOr(ctx, err))
		}
	}
	closed = true
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", p.tmp, ctxOr(ctx, err))
	}
	if r.h != nil {
		p.sum = hex.EncodeToString(r.h.Sum(nil))
	}
	return nil
}

// hashingReader reads at most remaining bytes from r, hashing them (when h is
// set), and fails once ctx is done. Size tells sftp how much is left, so it writes
// concurrently.
type hashingReader struct {
	ctx       context.Context
	r         io.Reader
	h         hash.Hash
	remaining int64
}

func (r *hashingReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, context.Cause(r.ctx)
	}
	if r.remaining <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.remaining {
		p = p[:r.remaining]
	}
	n, err := r.r.Read(p)
	if r.h != nil {
		r.h.Write(p[:n])
	}
	r.remaining -= int64(n)
	return n, err // a short reader is caught by the caller's size check
}

func (r *hashingReader) Size() int64 { return r.remaining }

// parseSHA256Sum parses n lines of sha256sum output, in argument order. GNU
// sha256sum prefixes a line with '\' when the name needed escaping.
func parseSHA256Sum(out []byte, n int) ([]string, error) {
	var sums []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), `\`)
		if len(line) < 64 {
			return nil, fmt.Errorf("unexpected sha256sum output line %q", line)
		}
		sum := strings.ToLower(line[:64])
		if _, err := hex.DecodeString(sum); err != nil {
			return nil, fmt.Errorf("unexpected sha256sum output line %q", line)
		}
		sums = append(sums, sum)
	}
	if len(sums) != n {
		return nil, fmt.Errorf("sha256sum printed %d checksums for %d files", len(sums), n)
	}
	return sums, nil
}

// ErrNoSFTPServer is wrapped by the error of [Client.Upload] for a non-root
// user when no sftp-server binary was found on the host at connect time.
var ErrNoSFTPServer = errors.New("no sftp-server binary found (looked in " +
	"/usr/lib/openssh, /usr/libexec/openssh, /usr/lib/ssh, /usr/libexec and on PATH); install openssh-server's sftp-server")

// openSFTP starts an SFTP session on the client's connection: the "sftp"
// subsystem for root; for a non-root user the host's sftp-server binary run
// as root through the same sudo wrapper as every command, over an exec
// session. The session is closed when ctx is done (which unblocks any
// pending SFTP call) or when the returned func is called.
func (c *Client) openSFTP(ctx context.Context) (*sftp.Client, func(), error) {
	type opened struct {
		sc   *sftp.Client
		sess *ssh.Session
		err  error
	}
	ch := make(chan opened, 1)
	go func() {
		if c.priv == PrivilegeRoot {
			sc, err := sftp.NewClient(c.conn, sftp.UseConcurrentWrites(true))
			ch <- opened{sc, nil, err}
			return
		}
		sess, sc, err := c.startSFTPServer()
		ch <- opened{sc, sess, err}
	}()
	closer := func(o opened) func() {
		return func() {
			_ = o.sc.Close()
			if o.sess != nil {
				_ = o.sess.Close()
			}
		}
	}
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, nil, fmt.Errorf("start sftp: %w", c.connErr(o.err))
		}
		closeIt := closer(o)
		stop := context.AfterFunc(ctx, closeIt)
		return o.sc, func() { stop(); closeIt() }, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.sc != nil {
				closer(o)()
			}
		}()
		return nil, nil, fmt.Errorf("start sftp: %w", context.Cause(ctx))
	}
}

// startSFTPServer runs the host's sftp-server as root over an exec session
// and speaks SFTP over its stdin/stdout.
func (c *Client) startSFTPServer() (*ssh.Session, *sftp.Client, error) {
	if c.sftpServer == "" {
		return nil, nil, ErrNoSFTPServer
	}
	sess, err := c.conn.NewSession()
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*ssh.Session, *sftp.Client, error) {
		_ = sess.Close()
		return nil, nil, err
	}
	w, err := sess.StdinPipe()
	if err != nil {
		return fail(err)
	}
	r, err := sess.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	var stderr lockedBuffer
	sess.Stderr = &stderr
	line, prefix := c.remoteCommand("exec " + shell.Quote(c.sftpServer))
	c.commands.Add(1)
	if err := sess.Start(line); err != nil {
		return fail(err)
	}
	if prefix != nil {
		_, err := w.Write(prefix)
		clear(prefix)
		if err != nil {
			return fail(err)
		}
	}
	sc, err := sftp.NewClientPipe(r, w, sftp.UseConcurrentWrites(true))
	if err != nil {
		if msg := strings.TrimSpace(string(c.scrub(stderr.Bytes()))); msg != "" {
			err = fmt.Errorf("%s: %w (stderr: %s)", c.sftpServer, err, oneLine(msg))
		} else {
			err = fmt.Errorf("%s: %w", c.sftpServer, err)
		}
		return fail(err)
	}
	return sess, sc, nil
}

// removeTemps removes temporary files, best effort. When ctx is done the
// upload's SFTP session is gone, so a new one is opened, bounded by
// cleanupTimeout.
func (c *Client) removeTemps(ctx context.Context, sc *sftp.Client, tmps []string) {
	if ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		fresh, closeFresh, err := c.openSFTP(cctx)
		if err != nil {
			return
		}
		defer closeFresh()
		sc = fresh
	}
	for _, t := range tmps {
		_ = sc.Remove(t)
	}
}

// mkdirAll creates dir and missing parents with mode 0755 (explicitly, not
// subject to the server's umask); existing directories are left alone.
func mkdirAll(sc *sftp.Client, dir string) error {
	fi, err := sc.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if parent := path.Dir(dir); parent != dir {
		if err := mkdirAll(sc, parent); err != nil {
			return err
		}
	}
	if err := sc.Mkdir(dir); err != nil {
		if fi, serr := sc.Stat(dir); serr == nil && fi.IsDir() {
			return nil // created concurrently
		}
		return err
	}
	return sc.Chmod(dir, 0o755)
}

// ctxOr prefers the context's error when ctx is done: SFTP calls fail with
// "connection lost" once the session is closed on cancellation.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	}
	return err
}
