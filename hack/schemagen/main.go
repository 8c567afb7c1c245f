// Command schemagen writes the cluster spec's JSON Schema (draft 2020-12), api/v1alpha1's
// cluster.schema.json, from the API types and their doc comments (github.com/invopop/jsonschema).
// `hactl schema` prints the embedded copy and `hactl explain` walks it; a test regenerates it and
// fails when the committed file is stale. Run from the repository root:
//
//	go run ./hack/schemagen            # rewrites api/v1alpha1/cluster.schema.json
//	go run ./hack/schemagen -o -       # prints it
//
// The schema gives shapes, types and descriptions for editors: no field is required and value rules
// (ranges, cross-field checks) stay in v1alpha1.Validate.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hactl/hactl/internal/atomicfile"
)

func main() {
	out := flag.String("o", "api/v1alpha1/cluster.schema.json", `output file ("-": standard output)`)
	flag.Parse()
	b, err := Generate()
	if err != nil {
		fmt.Fprintf(os.Stderr, "schemagen: %v\n", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, _ = os.Stdout.Write(b)
		return
	}
	if err := atomicfile.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "schemagen: %v\n", err)
		os.Exit(1)
	}
}
