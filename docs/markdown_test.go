package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// mdBlock is one fenced code block of a Markdown file.
type mdBlock struct {
	info  string   // the info string after the fence ("sh", "yaml not-hactl-spec", "")
	line  int      // the 1-based line of the block's first content line
	lines []string // the block's content lines
}

// mdSpan is one inline code span of a Markdown file (outside fenced blocks).
type mdSpan struct {
	line int    // the 1-based line where the span opens
	text string // its content: line breaks as spaces, a table's `\|` as `|`
}

// mdFile is a Markdown file split into its fenced blocks and inline code spans.
type mdFile struct {
	name   string // relative to the repository root, e.g. "docs/upgrades.md"
	blocks []mdBlock
	spans  []mdSpan
}

// docFiles returns README.md and every docs/**/*.md, relative to the repository root, sorted.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, filepath.ToSlash(filepath.Join("docs", path)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files[1:])
	return files
}

// fenceRE matches a fence line: its indentation, the fence and the info string.
var fenceRE = regexp.MustCompile("^( {0,3})(```+|~~~+)\\s*(.*)$")

// readMarkdown reads the file name (relative to the repository root) into its fenced blocks and
// inline code spans.
func readMarkdown(t *testing.T, name string) mdFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	f := mdFile{name: name}
	lines := strings.Split(string(data), "\n")
	prose := make([]string, len(lines)) // the lines outside fenced blocks; blocks' lines blank
	var open *mdBlock
	var fence string
	for i, l := range lines {
		m := fenceRE.FindStringSubmatch(l)
		switch {
		case open == nil && m != nil:
			open, fence = &mdBlock{info: strings.TrimSpace(m[3]), line: i + 2}, m[2]
		case open != nil && m != nil && strings.HasPrefix(m[2], fence[:1]) && len(m[2]) >= len(fence) && m[3] == "":
			f.blocks = append(f.blocks, *open)
			open = nil
		case open != nil:
			open.lines = append(open.lines, l)
		default:
			prose[i] = l
		}
	}
	if open != nil {
		t.Errorf("%s:%d: a fenced block is never closed", name, open.line-1)
	}
	f.spans = codeSpans(prose)
	return f
}

// codeSpans returns the inline code spans of prose (a file's lines, fenced blocks blanked): a run of
// n backticks up to the next run of exactly n, within one paragraph (no blank line between).
func codeSpans(prose []string) []mdSpan {
	text := strings.Join(prose, "\n")
	var out []mdSpan
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		n := run(text, i)
		end := -1
		for j := i + n; j < len(text); {
			if text[j] != '`' {
				j++
				continue
			}
			if m := run(text, j); m == n {
				end = j
				break
			} else {
				j += m
			}
		}
		if end < 0 || strings.Contains(text[i:end], "\n\n") {
			i += n
			continue
		}
		body := strings.ReplaceAll(text[i+n:end], "\n", " ")
		body = strings.ReplaceAll(body, `\|`, "|")
		out = append(out, mdSpan{line: strings.Count(text[:i], "\n") + 1, text: strings.TrimSpace(body)})
		i = end + n
	}
	return out
}

// run is the length of the run of backticks at text[i].
func run(text string, i int) int {
	n := 0
	for i+n < len(text) && text[i+n] == '`' {
		n++
	}
	return n
}
