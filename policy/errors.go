package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/airlock-dev/airlock/errdefs"
)

// ErrInvalid is the kind of every error this package returns for a bad
// policy: errdefs.ErrInvalid (also sandbox.ErrInvalid) under this package's
// name.
var ErrInvalid = errdefs.ErrInvalid

// Error is one problem in a policy: where it is (file, line, dotted field
// path, each optional) and what is wrong. It unwraps to ErrInvalid.
type Error struct {
	File  string // file name as given to LoadFile/Parse; "" for built-in or Go-made policies
	Line  int    // 1-based line, 0 when unknown
	Field string // dotted path, e.g. filesystem.read_only[2]
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

// maxErrors bounds how many problems one load reports.
const maxErrors = 20

// joinErrors returns nil, the single error, or all of them joined (one per
// line). The result unwraps to ErrInvalid.
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	if len(errs) > maxErrors {
		errs = errs[:maxErrors]
	}
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}

// invalidf returns an error of kind ErrInvalid whose text is just the
// message (it ends up inside an *Error, which names where it happened).
func invalidf(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...)}
}

// message returns err's text without location when it is an *Error.
func message(err error) string {
	var e *Error
	if errors.As(err, &e) && e.File == "" && e.Line == 0 && e.Field == "" {
		return e.Msg
	}
	return err.Error()
}
