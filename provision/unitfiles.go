package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hactl/hactl/internal/shell"
)

// What systemd reads for a unit besides the unit file hactl renders: drop-ins, environment files, a
// unit file somewhere else. Any of them that sets something overrides hactl's settings from outside
// the spec (one source for every setting: the spec). The facts command reports them
// (FactsRequest.UnitFiles → Facts.UnitFiles) in the same round trip as every other fact; Overrides
// compares them with the files hactl (or kubeadm) owns; UnitFailedError carries the unit's last
// journal lines when it fails to start.

// UnitFiles is what systemd reads for one unit on a host (systemctl show's FragmentPath,
// DropInPaths and EnvironmentFiles, plus the drop-ins in the unit's own directories that systemd has
// not loaded yet: no daemon-reload since they were written).
type UnitFiles struct {
	// Fragment is the unit file systemd loaded ("" when none: not installed).
	Fragment string
	// DropIns are the drop-in files (absolute paths, deduplicated, in the order reported).
	DropIns []string
	// EnvFiles are the unit's EnvironmentFile= paths (without systemd's "-" prefix).
	EnvFiles []string
	// Content holds the drop-ins' and environment files' content by path (those that exist and are
	// at most 64 KiB).
	Content map[string][]byte
}

// dropInDirs are the directories systemd reads a system unit's drop-ins from (systemd.unit(5),
// "unit file load path", highest precedence first; system.control: systemctl set-property).
var dropInDirs = []string{"/etc/systemd/system.control", "/run/systemd/system.control", "/etc/systemd/system", "/run/systemd/system",
	"/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// maxUnitFileBytes bounds a drop-in or environment file the facts command reads.
const maxUnitFileBytes = 64 << 10

// unitFilesScript reports UnitFiles for units (full names): "uf.frag=<unit> <path>",
// "uf.dropin=<unit> <path>", "uf.env=<unit> <path>", and "uf.file=<base64> <path>" for their content.
// /lib/systemd/system is skipped where it is /usr/lib/systemd/system (merged /usr).
func unitFilesScript(units []string) string {
	return fmt.Sprintf(`ufread() { if [ -f "$1" ] && [ "$(stat -c %%s "$1")" -le %[3]d ]; then printf 'uf.file='; base64 -w0 "$1"; printf ' %%s\n' "$1"; fi; }
for u in %[1]s; do
  if command -v systemctl >/dev/null 2>&1; then
    systemctl show -p FragmentPath -p DropInPaths -p EnvironmentFiles -- "$u" 2>/dev/null | while IFS= read -r l; do
      v=${l#*=}
      case "$l" in
        FragmentPath=?*) fact uf.frag "$u $v" ;;
        DropInPaths=?*) for p in $v; do fact uf.dropin "$u $p"; ufread "$p"; done ;;
        EnvironmentFiles=?*) p=${v%% (ignore_errors=*}; fact uf.env "$u $p"; ufread "$p" ;;
      esac
    done
  fi
  for d in %[2]s; do
    if [ "$d" = /lib/systemd/system ] && [ /lib/systemd/system -ef /usr/lib/systemd/system ]; then continue; fi
    for p in "$d/$u.d"/*.conf; do if [ -f "$p" ]; then fact uf.dropin "$u $p"; ufread "$p"; fi; done
  done
done
`, shell.Join(units...), shell.Join(dropInDirs...), maxUnitFileBytes)
}

// parseUnitFiles reads unitFilesScript's facts into UnitFiles keyed by the units as asked.
func parseUnitFiles(asked []string, v map[string][]string) map[string]UnitFiles {
	content := map[string][]byte{}
	for _, s := range v["uf.file"] {
		if b64, p, ok := strings.Cut(s, " "); ok {
			if raw, err := decodeBase64(b64); err == nil {
				content[p] = raw
			}
		}
	}
	byUnit := map[string]*UnitFiles{}
	get := func(u string) *UnitFiles {
		if byUnit[u] == nil {
			byUnit[u] = &UnitFiles{Content: map[string][]byte{}}
		}
		return byUnit[u]
	}
	add := func(list []string, p string) []string {
		if slices.Contains(list, p) {
			return list
		}
		return append(list, p)
	}
	for _, key := range []string{"uf.frag", "uf.dropin", "uf.env"} {
		for _, s := range v[key] {
			u, p, ok := strings.Cut(s, " ")
			p = strings.TrimPrefix(p, "-")
			if !ok || !path.IsAbs(p) {
				continue
			}
			uf := get(u)
			switch key {
			case "uf.frag":
				uf.Fragment = p
			case "uf.dropin":
				uf.DropIns = add(uf.DropIns, p)
			case "uf.env":
				uf.EnvFiles = add(uf.EnvFiles, p)
			}
			if c, ok := content[p]; ok {
				uf.Content[p] = c
			}
		}
	}
	out := map[string]UnitFiles{}
	for _, u := range asked {
		if uf := byUnit[fullUnit(u)]; uf != nil {
			out[u] = *uf
		} else {
			out[u] = UnitFiles{Content: map[string][]byte{}}
		}
	}
	return out
}

// OwnedUnitFiles are the files of one unit that hactl renders (or kubeadm documents as its own):
// the only ones allowed to set anything.
type OwnedUnitFiles struct {
	// Unit is the unit's name ("etcd.service"; no suffix means ".service").
	Unit string
	// Fragment is the unit file hactl renders; "" when the unit file is a package's (HAProxy,
	// Keepalived, containerd): then a unit file under /etc or /run is an edited copy of it.
	Fragment string
	// DropIns and EnvFiles are the drop-ins and environment files hactl or kubeadm write.
	DropIns, EnvFiles []string
	// PackageDefaults are settings the unit's packages ship in their own environment files (e.g.
	// RHEL's /etc/sysconfig/keepalived: KEEPALIVED_OPTIONS="-D"), as written: not overrides.
	PackageDefaults []string
}

// Override kinds.
const (
	OverrideDropIn   = "drop-in"
	OverrideEnvFile  = "environment file"
	OverrideUnitFile = "unit file"
)

// Override is one file on a host that changes a unit hactl manages from outside the spec.
type Override struct {
	Unit string `json:"unit"`
	// Kind is OverrideDropIn, OverrideEnvFile or OverrideUnitFile.
	Kind string `json:"kind"`
	Path string `json:"path"`
	// Settings are the lines that set something ("Environment=ETCD_QUOTA_BACKEND_BYTES=1",
	// "KUBELET_EXTRA_ARGS=--max-pods=10"); empty for a unit file.
	Settings []string `json:"settings,omitempty"`
	// Instead is the unit file hactl renders, for OverrideUnitFile ("" for a package's unit).
	Instead string `json:"instead,omitempty"`
}

// String is one line naming the file and what it sets, e.g. `drop-in
// /etc/systemd/system/etcd.service.d/override.conf sets Environment=ETCD_QUOTA_BACKEND_BYTES=1 for
// etcd.service`.
func (o Override) String() string {
	switch {
	case o.Kind == OverrideUnitFile && o.Instead != "":
		return fmt.Sprintf("unit file %s is loaded for %s instead of %s, which hactl renders", o.Path, o.Unit, o.Instead)
	case o.Kind == OverrideUnitFile:
		return fmt.Sprintf("unit file %s replaces the package's %s (an edited copy)", o.Path, o.Unit)
	}
	return fmt.Sprintf("%s %s sets %s for %s", o.Kind, o.Path, strings.Join(o.Settings, "; "), o.Unit)
}

// Overrides returns the files of uf that override own's unit, in the order drop-ins, environment
// files, unit file: a drop-in in the unit's own directory (<unit>.d; systemd's shared service.d and
// prefix directories are not a unit's) that hactl does not write and that sets anything; an
// environment file the unit reads that hactl does not write and that assigns a non-empty value; a
// unit file other than hactl's (own.Fragment), or, for a package's unit, one under /etc or /run.
func Overrides(own OwnedUnitFiles, uf UnitFiles) []Override {
	unit := fullUnit(own.Unit)
	var out []Override
	for _, p := range uf.DropIns {
		if path.Base(path.Dir(p)) != unit+".d" || slices.Contains(own.DropIns, p) {
			continue
		}
		if s := unitSettings(uf.Content[p]); len(s) > 0 {
			out = append(out, Override{Unit: unit, Kind: OverrideDropIn, Path: p, Settings: s})
		}
	}
	for _, p := range uf.EnvFiles {
		if slices.Contains(own.EnvFiles, p) {
			continue
		}
		s := slices.DeleteFunc(envSettings(uf.Content[p]), func(s string) bool { return slices.Contains(own.PackageDefaults, s) })
		if len(s) > 0 {
			out = append(out, Override{Unit: unit, Kind: OverrideEnvFile, Path: p, Settings: s})
		}
	}
	switch f := uf.Fragment; {
	case f == "" || f == own.Fragment || f == "/dev/null":
	case own.Fragment != "":
		out = append(out, Override{Unit: unit, Kind: OverrideUnitFile, Path: f, Instead: own.Fragment})
	case strings.HasPrefix(f, "/etc/") || strings.HasPrefix(f, "/run/"):
		out = append(out, Override{Unit: unit, Kind: OverrideUnitFile, Path: f})
	}
	return out
}

// unitSettings returns a unit file's (drop-in's) assignments, "Key=Value" as written (comments,
// section headers and blank lines skipped; continuation lines joined).
func unitSettings(b []byte) []string {
	var out []string
	cont := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if cont && len(out) > 0 {
			out[len(out)-1] += " " + strings.TrimSpace(strings.TrimSuffix(l, "\\"))
			cont = strings.HasSuffix(l, "\\")
			continue
		}
		if l == "" || l[0] == '#' || l[0] == ';' || l[0] == '[' || !strings.Contains(l, "=") {
			continue
		}
		cont = strings.HasSuffix(l, "\\")
		out = append(out, strings.TrimSpace(strings.TrimSuffix(l, "\\")))
	}
	return out
}

// envSettings returns an environment file's assignments of a non-empty value ("KEY=value";
// comments, blank lines and KEY= or KEY="" skipped, "export " dropped).
func envSettings(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "export ")
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || strings.HasPrefix(k, "#") || strings.HasPrefix(k, ";") {
			continue
		}
		if v = strings.TrimSpace(v); v == "" || v == `""` || v == "''" {
			continue
		}
		out = append(out, l)
	}
	return out
}

// ForeignOverridesError refuses a run on a host where files hactl does not own override units it
// manages (Overrides). Remove them (then systemctl daemon-reload), or pass the command's Flag.
type ForeignOverridesError struct {
	Host      string
	Overrides []Override
	// Flag is the command's flag that keeps them (bootstrap's --allow-foreign-overrides); "" when the
	// command has none.
	Flag string
}

func (e *ForeignOverridesError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "host %s: %d file(s) hactl does not own override what it renders:", e.Host, len(e.Overrides))
	for _, o := range e.Overrides {
		b.WriteString("\n\t  " + o.String())
	}
	fmt.Fprintf(&b, "\n\t  the spec is the one source of these settings: remove the file(s) on %s (then systemctl daemon-reload)", e.Host)
	if e.Flag != "" {
		fmt.Fprintf(&b, ", or pass %s to keep them", e.Flag)
	}
	return b.String()
}

// JournalLines is how many of a unit's last journal lines UnitFailedError carries.
const JournalLines = 20

// JournalCommand prints unit's last n journal lines, messages only (journalctl -o cat).
func JournalCommand(unit string, n int) string {
	return fmt.Sprintf("journalctl -u %s -n %d --no-pager -o cat", shell.Quote(fullUnit(unit)), n)
}

// UnitFailedError is a command that started, restarted or reloaded a unit and failed, with the
// unit's last journal lines: the cause in the service's own words, not only systemctl's "see
// journalctl". Unwrap gives the command's error.
type UnitFailedError struct {
	Unit    string
	Journal string // the last JournalLines lines, trimmed
	Err     error
}

func (e *UnitFailedError) Error() string {
	lines := strings.Split(e.Journal, "\n")
	return fmt.Sprintf("%v\n\t  %s's last %d journal lines (%s):\n\t    %s", e.Err, e.Unit, len(lines), JournalCommand(e.Unit, JournalLines),
		strings.Join(lines, "\n\t    "))
}

func (e *UnitFailedError) Unwrap() error { return e.Err }

// journalTimeout bounds the journal read after a failure.
const journalTimeout = 10 * time.Second

// ExplainUnitFailure returns err with the last journal lines of the first of units whose journal
// has any (a *UnitFailedError wrapping err), or err unchanged when err is nil, ctx has ended (the
// run was interrupted), or no journal could be read. step names the journal command in logs.
func ExplainUnitFailure(ctx context.Context, run Runner, step string, err error, units ...string) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	var already *UnitFailedError
	if errors.As(err, &already) {
		return err
	}
	for _, u := range units {
		jctx, cancel := context.WithTimeout(ctx, journalTimeout)
		res, jerr := run.Run(jctx, step+"/journal", JournalCommand(u, JournalLines))
		cancel()
		if jerr != nil {
			continue
		}
		if j := string(bytes.TrimSpace(res.Stdout)); j != "" && j != "-- No entries --" {
			return &UnitFailedError{Unit: fullUnit(u), Journal: j, Err: err}
		}
	}
	return err
}
