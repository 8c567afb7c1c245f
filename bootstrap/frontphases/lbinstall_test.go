package frontphases

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTools are stand-ins for the host's tools, driven by files in $STATE: haproxy -c refuses a
// config containing INVALID; keepalived --config-test prints a warning (exit 0, as the real one
// does for some problems) for one containing WARN; systemctl logs every call to $STATE/log and
// "runs" a unit by reading its live config: HAProxy then listens on the config's "port N"; a config
// containing BINDFAIL reloads with exit 0 but the old workers keep the old port (as HAProxy's master
// does when new workers can't bind), which only ss shows; socat squats on port 7443 all along.
var fakeTools = map[string]string{
	"haproxy": `#!/bin/sh
f=""; while [ $# -gt 0 ]; do [ "$1" = -f ] && f=$2; shift; done
if grep -q INVALID "$f"; then echo "[ALERT] (1) : config : parsing [$f:3] : unknown keyword 'INVALID'"; exit 1; fi
exit 0
`,
	"keepalived": `#!/bin/sh
f=""; while [ $# -gt 0 ]; do [ "$1" = -f ] && f=$2; shift; done
if grep -q WARN "$f"; then echo "WARNING - interface eth9 for vrrp_instance hactl_apiserver doesn't exist"; fi
exit 0
`,
	"systemctl": `#!/bin/sh
echo "$*" >>"$STATE/log"
run() { # unit
  touch "$STATE/$1.active"
  if [ "$1" = haproxy ] && ! grep -q BINDFAIL "$HAP"; then
    # the new workers listen on the config's port; with BINDFAIL the old ones keep theirs
    sed -n 's/.*port \([0-9]*\).*/\1/p' "$HAP" >"$STATE/listening"
  fi
}
case "$1" in
is-active) [ -f "$STATE/$3.active" ];;
enable) exit 0;;
reload|restart) run "$2";;
*) exit 1;;
esac
`,
	"curl": "#!/bin/sh\n[ -f \"$STATE/haproxy.active\" ]\n",
	// ss -Hltnp "sport = :PORT": HAProxy's listener when it listens on PORT; socat squats on 7443.
	"ss": `#!/bin/sh
port=${2##*:}
if [ -f "$STATE/listening" ] && [ "$(cat "$STATE/listening")" = "$port" ]; then
  echo "LISTEN 0 4096 *:$port *:* users:((\"haproxy\",pid=7,fd=8))"
fi
if [ "$port" = 7443 ]; then echo 'LISTEN 0 5 0.0.0.0:7443 0.0.0.0:* users:(("socat",pid=9,fd=5))'; fi
exit 0
`,
	"journalctl": "#!/bin/sh\necho \"journal of $2\"\n",
}

type applyEnv struct {
	dir, state, hap, ka string
	env                 []string
}

func newApplyEnv(t *testing.T) *applyEnv {
	t.Helper()
	dir := t.TempDir()
	e := &applyEnv{dir: dir, state: filepath.Join(dir, "state"), hap: filepath.Join(dir, "haproxy.cfg"), ka: filepath.Join(dir, "keepalived.conf")}
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{bin, e.state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, script := range fakeTools {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STATE="+e.state, "HAP="+e.hap)
	return e
}

func (e *applyEnv) write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (e *applyEnv) read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// run stages the given new contents (live path → content) and runs lbApplyScript.
func (e *applyEnv) run(t *testing.T, staged map[string]string, reload, start []string) (string, int) {
	t.Helper()
	p := applyParams{haproxyPath: e.hap, keepalivedPath: e.ka, checkSeconds: 1, reload: reload, start: start, frontendPort: 6443}
	if strings.Contains(staged[e.hap], "port 7443") {
		p.frontendPort = 7443
	}
	for _, live := range []string{e.hap, e.ka} { // fixed order: the script validates in this order
		if c, ok := staged[live]; ok {
			e.write(t, live+stagedSuffix, c)
			p.staged = append(p.staged, live)
		}
	}
	cmd := exec.Command("sh", "-c", lbApplyScript(p))
	cmd.Env = e.env
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestLBApplyScript(t *testing.T) {
	t.Run("first install starts both units", func(t *testing.T) {
		e := newApplyEnv(t)
		out, code := e.run(t, map[string]string{e.hap: "hap v1 port 6443", e.ka: "ka v1"}, nil, []string{"haproxy", "keepalived"})
		if code != 0 || !strings.Contains(out, "started haproxy") || !strings.Contains(out, "started keepalived") {
			t.Fatalf("exit %d, output %q; want 0 and both started", code, out)
		}
		if e.read(t, e.hap) != "hap v1 port 6443" || e.read(t, e.ka) != "ka v1" || e.read(t, e.hap+previousSuffix) != "<missing>" {
			t.Errorf("live files %q %q, prev %q", e.read(t, e.hap), e.read(t, e.ka), e.read(t, e.hap+previousSuffix))
		}
		if log := e.read(t, filepath.Join(e.state, "log")); !strings.Contains(log, "enable --quiet haproxy") || !strings.Contains(log, "restart keepalived") {
			t.Errorf("systemctl calls:\n%s", log)
		}
	})
	t.Run("change reloads and keeps the previous file", func(t *testing.T) {
		e := newApplyEnv(t)
		e.write(t, e.hap, "hap v1 port 6443")
		touch(t, filepath.Join(e.state, "haproxy.active"))
		out, code := e.run(t, map[string]string{e.hap: "hap v2 port 6443"}, []string{"haproxy"}, nil)
		if code != 0 || !strings.Contains(out, "reloaded haproxy") {
			t.Fatalf("exit %d, output %q", code, out)
		}
		if e.read(t, e.hap) != "hap v2 port 6443" || e.read(t, e.hap+previousSuffix) != "hap v1 port 6443" || e.read(t, e.hap+stagedSuffix) != "<missing>" {
			t.Errorf("live %q prev %q staged %q", e.read(t, e.hap), e.read(t, e.hap+previousSuffix), e.read(t, e.hap+stagedSuffix))
		}
		if log := e.read(t, filepath.Join(e.state, "log")); strings.Contains(log, "restart") {
			t.Errorf("a reload restarted a unit:\n%s", log)
		}
	})
	for _, tc := range []struct{ name, file, content, want string }{
		{"haproxy -c refuses", "hap", "INVALID", "unknown keyword 'INVALID'"},
		{"keepalived warning is a failure", "ka", "WARN", "interface eth9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newApplyEnv(t)
			e.write(t, e.hap, "hap v1")
			e.write(t, e.ka, "ka v1")
			staged := map[string]string{e.hap: "hap v2", e.ka: "ka v2"}
			target := map[string]string{"hap": e.hap, "ka": e.ka}[tc.file]
			staged[target] = tc.content
			out, code := e.run(t, staged, []string{"haproxy", "keepalived"}, nil)
			if code != applyInvalid || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, output %q; want %d and %q", code, out, applyInvalid, tc.want)
			}
			for live, old := range map[string]string{e.hap: "hap v1", e.ka: "ka v1"} {
				if got := e.read(t, live); got != old {
					t.Errorf("%s changed to %q although validation failed", live, got)
				}
				if e.read(t, live+stagedSuffix) != "<missing>" {
					t.Errorf("%s%s left behind", live, stagedSuffix)
				}
			}
			if log := e.read(t, filepath.Join(e.state, "log")); log != "<missing>" {
				t.Errorf("units touched although validation failed:\n%s", log)
			}
		})
	}
	t.Run("failed reload rolls back", func(t *testing.T) {
		// The new frontend port is taken by socat: HAProxy's reload exits 0, the old workers keep
		// serving the old port, and only the port's owner shows the new configuration never ran.
		e := newApplyEnv(t)
		e.write(t, e.hap, "hap v1 port 6443")
		touch(t, filepath.Join(e.state, "haproxy.active"))
		e.write(t, filepath.Join(e.state, "listening"), "6443\n")
		out, code := e.run(t, map[string]string{e.hap: "hap v2 port 7443 BINDFAIL"}, []string{"haproxy"}, nil)
		if code != applyRolledBack || !strings.Contains(out, "haproxy: rolled back to the previous configuration") || !strings.Contains(out, "journal of haproxy") ||
			!strings.Contains(out, "haproxy listening on port 7443") {
			t.Fatalf("exit %d, output %q; want %d, a rollback and the journal", code, out, applyRolledBack)
		}
		if e.read(t, e.hap) != "hap v1 port 6443" || e.read(t, e.hap+previousSuffix) != "hap v1 port 6443" {
			t.Errorf("live %q prev %q; want the previous configuration back", e.read(t, e.hap), e.read(t, e.hap+previousSuffix))
		}
		if log := e.read(t, filepath.Join(e.state, "log")); strings.Count(log, "reload haproxy") != 2 {
			t.Errorf("want a reload and a rollback reload:\n%s", log)
		}
	})
	t.Run("failed first start has nothing to roll back to", func(t *testing.T) {
		e := newApplyEnv(t)
		out, code := e.run(t, map[string]string{e.hap: "BINDFAIL"}, nil, []string{"haproxy"})
		if code != applyBroken || !strings.Contains(out, "no working previous configuration") {
			t.Fatalf("exit %d, output %q; want %d", code, out, applyBroken)
		}
	})
}

func touch(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
