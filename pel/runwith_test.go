package pel_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
	"github.com/amduat/amduat/pel"
)

// threeConcats: 1 = const "abcd"; 2 = concat(1, 1); 3 = concat(2, 2).
// Node outputs are 4, 8 and 16 bytes.
func threeConcats(t *testing.T) *pel.Plan {
	t.Helper()
	p := pel.Program{
		Nodes: []pel.Node{constNode(t, 1, "abcd"), concatNode(2, pel.FromNode(1, 0), pel.FromNode(1, 0)), concatNode(3, pel.FromNode(2, 0), pel.FromNode(2, 0))},
		Roots: root(3),
	}
	pl, err := pel.Prepare(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func TestLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		limits   pel.Limits
		status   pel.ExecutionStatus
		code     uint32
		failNode pel.NodeID
		message  string
	}{
		{"none", pel.Limits{}, pel.StatusOK, 0, 0, ""},
		{"nodes exactly enough", pel.Limits{MaxNodes: 3}, pel.StatusOK, 0, 0, ""},
		{"nodes", pel.Limits{MaxNodes: 2}, pel.StatusRuntimeFailed, pel.StatusLimitNodes, 3, "node 3: node limit 2 reached"},
		{"bytes exactly enough", pel.Limits{MaxOutputBytes: 28}, pel.StatusOK, 0, 0, ""},
		{"bytes", pel.Limits{MaxOutputBytes: 27}, pel.StatusRuntimeFailed, pel.StatusLimitOutputBytes, 3, "node 3: outputs total 28 bytes, above the limit of 27"},
		{"bytes early", pel.Limits{MaxOutputBytes: 5}, pel.StatusRuntimeFailed, pel.StatusLimitOutputBytes, 2, "node 2: outputs total 12 bytes, above the limit of 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []pel.NodeEvent
			outs, res, err := threeConcats(t).RunWith(nil, nil, pel.ObserverFunc(func(e pel.NodeEvent) { events = append(events, e) }), pel.RunOptions{Limits: tt.limits})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.status || res.Summary.StatusCode != tt.code {
				t.Fatalf("status %s/%d, want %s/%d", res.Status, res.Summary.StatusCode, tt.status, tt.code)
			}
			if err := res.Validate(); err != nil {
				t.Fatal(err)
			}
			if tt.status == pel.StatusOK {
				if len(outs) != 1 || len(outs[0].Bytes) != 16 {
					t.Fatalf("outputs %v", outs)
				}
				return
			}
			last := events[len(events)-1]
			if outs != nil || last.NodeID != tt.failNode || last.Status != pel.StatusRuntimeFailed || string(res.Diagnostics[0].Message) != tt.message {
				t.Fatalf("outputs %d, last event node %d %s, diagnostics %q", len(outs), last.NodeID, last.Status, res.Diagnostics[0].Message)
			}
		})
	}
}

type mapMemo struct {
	m              map[string][]asl.Artifact
	hits, recorded int
}

func memoKey(op pel.OperationID, params []byte, inputs []asl.Artifact, global *asl.Artifact) string {
	k := fmt.Sprintf("%s/%d/%x", op.Name, op.Version, params)
	for _, in := range inputs {
		k += "/" + asl.MustDerive(asl.HashSHA256, in).String()
	}
	if global != nil {
		k += "/g" + asl.MustDerive(asl.HashSHA256, *global).String()
	}
	return k
}

func (m *mapMemo) Lookup(op pel.OperationID, params []byte, inputs []asl.Artifact, global *asl.Artifact) ([]asl.Artifact, bool) {
	outs, ok := m.m[memoKey(op, params, inputs, global)]
	if ok {
		m.hits++
	}
	return outs, ok
}

func (m *mapMemo) Record(op pel.OperationID, params []byte, inputs []asl.Artifact, global *asl.Artifact, outputs []asl.Artifact) {
	m.recorded++
	m.m[memoKey(op, params, inputs, global)] = append([]asl.Artifact(nil), outputs...)
}

func TestMemoLeavesResultsUnchanged(t *testing.T) {
	t.Parallel()
	calls := 0
	reg, err := opreg.Kernel().Extend(opreg.Operation{
		ID: opreg.OperationID{Name: "test.count", Version: 1}, MinInputs: 1, MaxInputs: 1,
		DecodeParams: func([]byte) (any, error) { return nil, nil },
		EncodeParams: func(any) ([]byte, error) { return nil, nil },
		Run: func(c opreg.Call) ([]asl.Artifact, *opreg.OpError) {
			calls++
			return []asl.Artifact{asl.Untagged(append(bytes.Clone(c.Inputs[0].Bytes), '!'))}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	count := pel.OperationID{Name: "test.count", Version: 1}
	p := pel.Program{Nodes: []pel.Node{
		{ID: 1, Op: count, Inputs: []pel.DagInput{pel.External(0)}},
		{ID: 2, Op: count, Inputs: []pel.DagInput{pel.FromNode(1, 0)}},
		{ID: 3, Op: count, Inputs: []pel.DagInput{pel.External(0)}}, // same computation as node 1
	}, Roots: []pel.RootRef{{NodeID: 2}, {NodeID: 3}}}
	pl, err := pel.Prepare(p, reg)
	if err != nil {
		t.Fatal(err)
	}
	in := []asl.Artifact{asl.Untagged([]byte("x"))}
	plainOuts, plainRes := pl.Run(in, nil, nil)
	memo := &mapMemo{m: map[string][]asl.Artifact{}}
	calls = 0
	outs, res, err := pl.RunWith(in, nil, nil, pel.RunOptions{Memo: memo})
	if err != nil || calls != 2 || memo.hits != 1 {
		t.Fatalf("first memo run: calls %d hits %d err %v; want 2 calls, 1 hit (node 3 reuses node 1)", calls, memo.hits, err)
	}
	for run := 0; run < 2; run++ {
		if fmt.Sprint(outs) != fmt.Sprint(plainOuts) || fmt.Sprint(res) != fmt.Sprint(plainRes) {
			t.Fatalf("memo changed the outcome: %v %v vs %v %v", outs, res, plainOuts, plainRes)
		}
		calls = 0
		outs, res, err = pl.RunWith(in, nil, nil, pel.RunOptions{Memo: memo})
		if err != nil || calls != 0 {
			t.Fatalf("memoized rerun executed %d operations (err %v)", calls, err)
		}
	}
}

func TestInterrupt(t *testing.T) {
	t.Parallel()
	stopErr := errors.New("deadline")
	n := 0
	_, _, err := threeConcats(t).RunWith(nil, nil, nil, pel.RunOptions{Interrupt: func() error {
		if n++; n == 2 {
			return stopErr
		}
		return nil
	}})
	if !errors.Is(err, stopErr) {
		t.Fatalf("err = %v, want the interrupt's error", err)
	}
}
