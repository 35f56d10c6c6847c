package client

import (
	"context"
	"time"

	"github.com/airlock-dev/airlock/api"
)

// CodeOptions are the optional settings of RunCode.
type CodeOptions struct {
	// Language: api.LanguagePython (default) or api.LanguageJavaScript.
	Language string
	// Timeout bounds the cell (server default 60s).
	Timeout time.Duration
}

// RunCode runs code as the next cell of sandbox id's interpreter for the
// language, which keeps its state (names, imports) between calls. A cell
// that raises is not an error: see Result.Error. Figures drawn with
// matplotlib come back in Result.Images as PNG.
func (c *Client) RunCode(ctx context.Context, id, code string, o CodeOptions) (*api.CodeResult, error) {
	req := api.CodeRequest{Code: code, Language: o.Language, Timeout: api.Duration(o.Timeout)}
	var r api.CodeResult
	if err := c.call(ctx, "POST", sbPath(id, "/code"), nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
