package mcptools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type checkpointIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	Name      string `json:"name,omitempty" jsonschema:"a short note of what state this is (e.g. 'tests pass')"`
}

type checkpointOut struct {
	CheckpointID string `json:"checkpoint_id" jsonschema:"pass it to rollback"`
	Files        int    `json:"files"`
	Bytes        int64  `json:"bytes"`
}

type rollbackIn struct {
	SandboxID    string `json:"sandbox_id" jsonschema:"the id returned by create_sandbox"`
	CheckpointID string `json:"checkpoint_id" jsonschema:"the id returned by checkpoint"`
}

func (t *tools) registerCheckpoints(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "checkpoint", Description: "Record the sandbox's workspace (every file of its workdir) as a checkpoint " +
		"before a risky change, and return its checkpoint_id. Cheap: unchanged files are stored once."}, t.checkpoint)
	mcp.AddTool(s, &mcp.Tool{Name: "rollback", Description: "Restore the sandbox's workspace exactly to a checkpoint (same sandbox_id). " +
		"Background processes and interpreter state end: start them again. A checkpoint that no longer matches its recorded hashes is refused."}, t.rollback)
}

func (t *tools) checkpoint(ctx context.Context, _ *mcp.CallToolRequest, in checkpointIn) (*mcp.CallToolResult, checkpointOut, error) {
	const op = "checkpoint"
	if err := t.owned(ctx, in.SandboxID); err != nil {
		return nil, checkpointOut{}, explain(op, err, "")
	}
	cp, err := t.cfg.Client.Checkpoint(ctx, in.SandboxID, in.Name)
	if err != nil {
		return nil, checkpointOut{}, explain(op, err, "")
	}
	out := checkpointOut{CheckpointID: cp.ID, Files: cp.Files, Bytes: cp.Bytes}
	return text(fmt.Sprintf("checkpoint %s: %d entries, %d bytes", cp.ID, cp.Files, cp.Bytes)), out, nil
}

func (t *tools) rollback(ctx context.Context, _ *mcp.CallToolRequest, in rollbackIn) (*mcp.CallToolResult, sandboxOut, error) {
	const op = "rollback"
	if err := t.owned(ctx, in.SandboxID); err != nil {
		return nil, sandboxOut{}, explain(op, err, "")
	}
	if in.CheckpointID == "" {
		return nil, sandboxOut{}, explain(op, fmt.Errorf("checkpoint_id is empty: %w", errMissing), "")
	}
	sb, err := t.cfg.Client.Rollback(ctx, in.SandboxID, in.CheckpointID)
	if err != nil {
		return nil, sandboxOut{}, explain(op, err, "")
	}
	return text(fmt.Sprintf("sandbox %s restored to checkpoint %s; background processes were ended", sb.ID, in.CheckpointID)), view(sb), nil
}
