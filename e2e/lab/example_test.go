package lab_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hactl/hactl/e2e/lab"
)

// A typical e2e TestMain: one lab per package run, torn down at the end and on failure.
//
//	func TestMain(m *testing.M) {
//		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
//		l, err := lab.Up(ctx, lab.Options{Members: 3, Logf: log.Printf, Debugf: log.Printf})
//		cancel()
//		if err != nil {
//			log.Fatal(err)
//		}
//		code := m.Run()
//		if err := l.Down(context.Background()); err != nil {
//			log.Print(err)
//		}
//		os.Exit(code)
//	}
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Options{Members: 3, Logf: log.Printf})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Down(context.WithoutCancel(ctx))

	// hactl is pointed at the lab only through the spec.
	fmt.Println(l.SpecPath(3))
	// Assertions may look inside a host directly.
	out, err := l.Exec(ctx, "cp-a", "systemctl", "is-active", "etcd")
	fmt.Println(out, err)
	// Faults: crash and restart a host.
	_ = l.Kill(ctx, "cp-b")
	_ = l.Start(ctx, "cp-b")
}
