package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeDocker puts a `docker` script first on PATH that appends each command line to a log and
// answers `network rm` with "has active endpoints" until it has been asked failures times.
func fakeDocker(t *testing.T, failures int) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "log")
	script := `#!/bin/sh
echo "$*" >> ` + log + `
case "$1 $2" in
"ps -a") echo hactl-lab-cp-a; echo other ;;
"network ls") echo bridge; echo hactl-lab ;;
"volume ls") ;;
"network rm")
  n=$(grep -c '^network rm' ` + log + `)
  if [ "$n" -le ` + string(rune('0'+failures)) + ` ]; then
    echo "Error response from daemon: error while removing network: network hactl-lab id 1 has active endpoints" >&2; exit 1
  fi ;;
"network inspect")
  case "$*" in
  *"len .Containers"*) echo ${ATTACHED:-0} ;;
  *) echo "hactl-lab-gone " ;;
  esac ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// TestDownDisconnectsStaleEndpoints: a lab network whose removal fails with "active endpoints"
// (a container gone, its endpoint not) has each endpoint inspect lists, and each container Down just
// removed, disconnected by force and is removed on a later try; removal that keeps failing returns the daemon's error.
func TestDownDisconnectsStaleEndpoints(t *testing.T) {
	defer func(p time.Duration) { staleEndpointPause = p }(staleEndpointPause)
	staleEndpointPause = 10 * time.Millisecond
	log := fakeDocker(t, 2)
	if err := Down(context.Background()); err != nil {
		t.Fatalf("down: %v", err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"rm -f -v hactl-lab-cp-a\n",
		"network disconnect --force hactl-lab hactl-lab-gone\n", // listed by inspect
		"network disconnect --force hactl-lab hactl-lab-cp-a\n", // just removed, not listed
	} {
		if !strings.Contains(got, want) {
			t.Errorf("docker commands lack %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "network rm hactl-lab\n"); n != 3 {
		t.Errorf("network rm ran %d times, want 3 (two refusals, then success):\n%s", n, got)
	}
	if strings.Contains(got, "other") || strings.Contains(got, "rm bridge") {
		t.Errorf("touched something outside the lab:\n%s", got)
	}

	fakeDocker(t, 9)
	err = Down(context.Background())
	if err == nil || !strings.Contains(err.Error(), "active endpoints") || !errors.Is(err, ErrStaleEndpoints) {
		t.Fatalf("down with a stale endpoint that never goes, no container attached: %v, want the daemon's error marked ErrStaleEndpoints", err)
	}
	t.Setenv("ATTACHED", "1")
	fakeDocker(t, 9)
	err = Down(context.Background())
	if err == nil || !strings.Contains(err.Error(), "active endpoints") || errors.Is(err, ErrStaleEndpoints) {
		t.Fatalf("down with a container still attached: %v, want the daemon's error, not marked stale", err)
	}
}
