package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hactl/hactl/backup"
	"github.com/hactl/hactl/bootstrap/restore"
	"github.com/hactl/hactl/internal/exitcode"
	"github.com/hactl/hactl/kubeapi"
	"github.com/hactl/hactl/phase"
)

// requiredPhases can't be skipped: every later phase works on what they produce (preflight: the SSH
// connections and host facts; pki: the state record and credentials; plan: each member's plan).
// Skipping them made bootstrap dereference nil state. Individual preflight checks are skipped with
// --ignore-preflight-errors instead.
var requiredPhases = map[string]string{
	"preflight": "it opens the SSH connections and gathers the host facts every later phase uses; to skip individual checks use --ignore-preflight-errors",
	"pki":       "it loads the cluster record and the TLS credentials every later phase uses",
	"plan":      "it decides what every later phase does on each host",
}

// CheckSkippable refuses --skip-phases names that match a required phase (exactly or as a group
// "name/"): an *exitcode.UsageError naming the phase and why it is needed. It needs no spec.
func CheckSkippable(skip []string) error {
	for _, s := range skip {
		for name, why := range requiredPhases {
			if s == name || (strings.HasSuffix(s, "/") && strings.HasPrefix(name, s)) {
				return &exitcode.UsageError{Err: fmt.Errorf("--skip-phases: phase %q can't be skipped: %s", name, why)}
			}
		}
	}
	return nil
}

// checkNames refuses a name of got that is none of valid (nor a group "x/" of them; "all" for
// --ignore-preflight-errors): an *exitcode.UsageError naming flag and listing valid.
func checkNames(flag string, got, valid []string) error {
	for _, g := range got {
		ok := g == "all" && flag == "--ignore-preflight-errors"
		for _, v := range valid {
			ok = ok || g == v || (strings.HasSuffix(g, "/") && strings.HasPrefix(v, g))
		}
		if !ok {
			return &exitcode.UsageError{Err: fmt.Errorf("%s: unknown name %q; valid: %s", flag, g, strings.Join(valid, ", "))}
		}
	}
	return nil
}

// PrepareOptions are one `hactl bootstrap`: the run's Options (RestoreFrom is set by Prepare from
// RestoreSource) and what Prepare resolves and checks before it.
type PrepareOptions struct {
	Options
	// RestoreSource is --restore-from (nil: none), resolved and verified here with IdentityFile;
	// SpecFile names the spec in errors. HostFetch lets the members fetch an unencrypted backup
	// themselves (never on a dry run: the backup is verified here).
	RestoreSource *backup.Source
	SpecFile      string
	IdentityFile  string
	HostFetch     bool
	// Kubeconfig is --kubeconfig/--context for the operator drift check (nil: as checkOperatorDrift finds it).
	Kubeconfig *kubeapi.Kubeconfig
}

// Prepare is everything `hactl bootstrap` does before Run: --replace-lost refused beside
// --restore-from before anything is fetched, --restore-from resolved and verified here
// (backup.Resolve; any member count), the run prepared (New), --skip-phases,
// --ignore-preflight-errors and --replace-lost checked against the run's phases, checks and etcd
// hosts, and the spec refused when hactl-operator's heals have left it behind
// (checkOperatorDrift). cleanup removes a downloaded snapshot after the run; it is never nil.
//
// Errors: backup.Resolve's and New's as they are; an unknown name or the two flags together →
// *exitcode.UsageError (exit 2); checkOperatorDrift's.
func Prepare(ctx context.Context, o PrepareOptions) (b *Bootstrapper, cleanup func(), err error) {
	cleanup = func() {}
	c, p := o.Cluster, o.Printer
	if len(o.ReplaceLost) > 0 && o.RestoreSource != nil {
		return nil, cleanup, &exitcode.UsageError{Err: errors.New("--replace-lost and --restore-from: a restore builds a new cluster, there is no member to replace; use one of them")}
	}
	if o.RestoreSource != nil {
		snap, err := backup.Resolve(ctx, c, *o.RestoreSource, backup.ResolveOptions{Flag: "--restore-from", SpecFile: o.SpecFile, Force: true, IdentityFile: o.IdentityFile,
			Getenv: os.Getenv, Progress: p.Infof, HostFetch: o.HostFetch && !o.DryRun}) // a dry run verifies the backup here
		if err != nil {
			return nil, cleanup, err
		}
		cleanup = snap.Cleanup
		so := restore.ResolvedOptions(snap)
		o.RestoreFrom = &so
	}
	if b, err = New(o.Options); err != nil {
		return nil, cleanup, err
	}
	if err := checkNames("--skip-phases", o.SkipPhases, phase.Titles(b.Phases())); err != nil {
		return nil, cleanup, err
	}
	if err := checkNames("--ignore-preflight-errors", o.IgnorePreflightErrors, Checks); err != nil {
		return nil, cleanup, err
	}
	var etcdHosts []string
	for _, h := range c.EtcdHosts() {
		etcdHosts = append(etcdHosts, h.Name)
	}
	if err := checkNames("--replace-lost", o.ReplaceLost, etcdHosts); err != nil {
		return nil, cleanup, err
	}
	if err := checkOperatorDrift(ctx, c, o.Kubeconfig, o.Prompt, p); err != nil {
		return nil, cleanup, err
	}
	return b, cleanup, nil
}
