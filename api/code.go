package api

// Languages of POST /v1/sandboxes/{id}/code.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
)

// CodeRequest is the body of POST /v1/sandboxes/{id}/code: run Code as the
// next cell of the sandbox's interpreter for Language, whose state (names,
// imports) is kept between calls.
type CodeRequest struct {
	Code string `json:"code"`
	// Language: "python" (default) or "javascript" (needs node in the sandbox).
	Language string `json:"language,omitempty"`
	// Timeout bounds the cell (default 60s); then it is interrupted, and the
	// interpreter killed if it does not stop.
	Timeout Duration `json:"timeout,omitempty"`
}

// CodeResult is the outcome of a cell. A cell that raised still answers
// 200, with Error set.
type CodeResult struct {
	Language string `json:"language"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Result is the repr of the cell's last expression, when it has one.
	Result *string    `json:"result,omitempty"`
	Error  *CodeError `json:"error,omitempty"`
	// Images are the figures the cell drew (matplotlib, as PNG).
	Images         []CodeImage `json:"images,omitempty"`
	ExecutionCount int         `json:"execution_count"`
	Truncated      bool        `json:"output_truncated,omitempty"`
	// NewInterpreter: this call started a new interpreter, so names
	// defined by earlier calls are gone.
	NewInterpreter bool `json:"new_interpreter,omitempty"`
	// StateLost: the interpreter is gone after this cell (it died or was
	// killed); the next call starts a new one.
	StateLost  bool    `json:"state_lost,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// CodeError is an exception a cell raised. Name is the language's exception
// name, or TimeoutError, or KernelDied (the interpreter process ended).
type CodeError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback,omitempty"`
}

// CodeImage is an image a cell produced; Data is base64 in JSON.
type CodeImage struct {
	Format string `json:"format"` // "png"
	Data   []byte `json:"data"`
}
