package phase

import (
	"fmt"
	"slices"
)

// List is an ordered phase list that commands compose from phase groups: a group exports its
// phases' titles as constants ("etcd/install"), and another group inserts its own phases before or
// after them, or replaces one, by that identity — never by matching titles in a switch.
type List []Phase

// UnknownPhaseError: a List operation named a title the list does not hold (a programming error:
// the groups' exported titles and their lists disagree).
type UnknownPhaseError struct {
	Title string
	// Have are the list's titles.
	Have []string
}

func (e *UnknownPhaseError) Error() string {
	return fmt.Sprintf("no phase %q in the list (have %v)", e.Title, e.Have)
}

// Index returns the position of the phase titled title, or -1.
func (l List) Index(title string) int {
	return slices.IndexFunc(l, func(p Phase) bool { return p.Title() == title })
}

func (l List) at(title string) (int, error) {
	i := l.Index(title)
	if i < 0 {
		return -1, &UnknownPhaseError{Title: title, Have: Titles(l)}
	}
	return i, nil
}

// InsertBefore returns a new list with ps inserted, in order, right before the phase titled title.
// l is not modified. Errors: *UnknownPhaseError.
func (l List) InsertBefore(title string, ps ...Phase) (List, error) {
	i, err := l.at(title)
	if err != nil {
		return nil, err
	}
	return slices.Insert(slices.Clone(l), i, ps...), nil
}

// InsertAfter returns a new list with ps inserted, in order, right after the phase titled title.
// l is not modified. Errors: *UnknownPhaseError.
func (l List) InsertAfter(title string, ps ...Phase) (List, error) {
	i, err := l.at(title)
	if err != nil {
		return nil, err
	}
	return slices.Insert(slices.Clone(l), i+1, ps...), nil
}

// Replace returns a new list with the phase titled title replaced by p. l is not modified. Errors:
// *UnknownPhaseError.
func (l List) Replace(title string, p Phase) (List, error) {
	i, err := l.at(title)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(l)
	out[i] = p
	return out, nil
}

// Pick returns the phases titled titles, in that order (a group composing its own list from
// another group's phases). Errors: *UnknownPhaseError for the first title l lacks.
func (l List) Pick(titles ...string) (List, error) {
	out := make(List, 0, len(titles))
	for _, t := range titles {
		i, err := l.at(t)
		if err != nil {
			return nil, err
		}
		out = append(out, l[i])
	}
	return out, nil
}
