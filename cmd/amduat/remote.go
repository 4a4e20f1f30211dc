package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/httpstore"
	"github.com/amduat/amduat/report"
	"github.com/amduat/amduat/surf"
)

// runRemote runs req on the server behind c (POST /v1/pel/run, SPECS.md
// §18.6), so the run uses the server's action cache, node memo and
// provenance index. The client does not trust the answer: it fetches the
// result artifact (re-hashed as every read) and checks that it answers
// the request; the outputs and status it prints come from those verified
// bytes.
func runRemote(ctx context.Context, c *httpstore.Client, rr report.RunRequest) (*surf.Run, error) {
	var rep report.Run
	// A run is a pure function of its request: repeating it is safe.
	if err := c.DoJSON(ctx, http.MethodPost, "/v1/pel/run", true, rr, &rep); err != nil {
		return nil, err
	}
	art, err := asl.Get(ctx, c, rep.ResultRef, 0)
	if err != nil {
		return nil, fmt.Errorf("result %s of the server's run: %w", rep.ResultRef, err)
	}
	res, err := surf.DecodeResultArtifact(art)
	if err != nil {
		return nil, fmt.Errorf("result %s of the server's run does not decode: %v: %w", rep.ResultRef, err, asl.ErrIntegrity)
	}
	req := rr.Surface()
	if res.ProgramRef != req.ProgramRef || !slices.Equal(res.InputRefs, req.InputRefs) || res.HasParams != req.HasParams ||
		(req.HasParams && res.ParamsRef != req.ParamsRef) || res.Limits != req.Limits {
		return nil, fmt.Errorf("result %s from the server answers another request: %w", rep.ResultRef, asl.ErrIntegrity)
	}
	return &surf.Run{ResultRef: rep.ResultRef, TraceRef: rep.TraceRef, OutputRefs: res.OutputRefs, Result: res,
		CacheHit: rep.Cache == report.CacheHit, EdgeRef: rep.EdgeRef, NodesReused: rep.NodesReused}, nil
}
