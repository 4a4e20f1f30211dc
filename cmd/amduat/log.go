package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
	"github.com/amduat/amduat/surf"
)

func init() { addCommand(newLogCmd) }

type logJSON struct {
	Seq        uint64        `json:"seq"`
	Time       string        `json:"time"`
	Status     string        `json:"status"`
	StatusCode uint32        `json:"status_code"`
	Cache      string        `json:"cache"`
	DurationNS int64         `json:"duration_ns"`
	ResultRef  asl.Reference `json:"result_ref"`
	ProgramRef asl.Reference `json:"program_ref"`
	RequestKey string        `json:"request_key"`
}

func logLine(r surf.LogRecord) string {
	return fmt.Sprintf("%d %s %s 0x%08x %s %s %s %s", r.Seq, r.Time.UTC().Format(time.RFC3339Nano), r.Status, r.StatusCode,
		r.Cache, r.Duration.Round(time.Microsecond), r.ResultRef, r.ProgramRef)
}

func logObj(r surf.LogRecord) logJSON {
	return logJSON{Seq: r.Seq, Time: r.Time.UTC().Format(time.RFC3339Nano), Status: r.Status.String(), StatusCode: r.StatusCode,
		Cache: r.Cache, DurationNS: int64(r.Duration), ResultRef: r.ResultRef, ProgramRef: r.ProgramRef, RequestKey: hex.EncodeToString(r.RequestKey[:])}
}

// parseStatus accepts a status name (OK, INVALID_INPUTS, …) or its number.
func parseStatus(s string) (pel.ExecutionStatus, error) {
	for v := pel.ExecutionStatus(0); v < 16; v++ {
		if v.Valid() && strings.EqualFold(v.String(), s) {
			return v, nil
		}
	}
	if n, err := strconv.ParseUint(s, 10, 8); err == nil && pel.ExecutionStatus(n).Valid() {
		return pel.ExecutionStatus(n), nil
	}
	return 0, usagef("--status %q: want OK, SCHEME_UNSUPPORTED, INVALID_PROGRAM, INVALID_INPUTS or RUNTIME_FAILED", s)
}

func newLogCmd(a *app) *cobra.Command {
	var (
		since  uint64
		status string
		follow bool
		poll   time.Duration
	)
	c := &cobra.Command{
		Use:   "log [--since N] [--status S] [--follow]",
		Short: "Show the run log: one record per surface run, in order",
		Long: `Print the store's run log (SPECS.md §19.7): one line per surface run (pel run,
executed or answered from the action cache), oldest first:

  SEQ TIME STATUS STATUS_CODE CACHE DURATION RESULT_REF PROGRAM_REF

SEQ numbers records from 1 in log order; TIME is UTC (RFC 3339); CACHE is hit,
miss or off. --since N shows the records after number N, --status S only
runs with that status (a name or number). --follow prints the records so far,
then new ones as runs happen, until interrupted (polling every --poll).
The log is store metadata: time appears there and nowhere else; runs are
byte-identical whatever their log says. Against a server the log is the
server's (every run executes there).

With --json the output is JSON lines, one object per record: {"seq", "time",
"status", "status_code", "cache", "duration_ns", "result_ref",
"program_ref", "request_key"}.`,
		Example: `  amduat log --status RUNTIME_FAILED
  amduat log --since 100 --json
  amduat log --follow`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) (err error) {
			f := surf.LogFilter{Since: since}
			if status != "" {
				st, err := parseStatus(status)
				if err != nil {
					return err
				}
				f.HasStatus, f.Status = true, st
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			open := true
			defer func() {
				if open {
					closeStore(s, a.storeDir, &err)
				}
			}()
			w := bufio.NewWriterSize(a.stdout, 64<<10)
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			emit := func(r surf.LogRecord) error {
				var err error
				if a.jsonOut {
					err = enc.Encode(logObj(r))
				} else {
					_, err = fmt.Fprintln(w, logLine(r))
				}
				if err != nil {
					return fail(exitIO, "stdout", err)
				}
				return nil
			}
			bad := func(seq uint64, key []byte, err error) {
				a.warnf(fmt.Sprintf("record %d", seq), err)
			}
			ctx := c.Context()
			pos, err := surf.ReadLog(ctx, s, f, emit, bad)
			if ferr := w.Flush(); err == nil && ferr != nil {
				err = fail(exitIO, "stdout", ferr)
			}
			if err != nil {
				return failAuto(a.storeDir, err)
			}
			if !follow {
				return nil
			}
			if pos.Seq < since {
				pos = surf.LogPos{Seq: since}
			}
			// An embedded store admits one process at a time: between polls
			// the follower lets it go, so runs can happen.
			reopen := !isRemote(a.storeDir)
			if reopen {
				open = false
				if err := s.Close(); err != nil {
					return failAuto(a.storeDir, err)
				}
			}
			t := time.NewTicker(poll)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-t.C:
				}
				if reopen {
					if s, err = a.openStoreReadOnly(); err != nil {
						if classify(err) == exitIO {
							continue // held by another process: try at the next poll
						}
						return err
					}
					open = true
				}
				pos, err = surf.ReadLogAfter(ctx, s, pos, time.Now(), f, emit)
				if reopen {
					open = false
					if cerr := s.Close(); err == nil && cerr != nil {
						err = cerr
					}
				}
				if err != nil {
					return failAuto(a.storeDir, err)
				}
				if err := w.Flush(); err != nil {
					return fail(exitIO, "stdout", err)
				}
			}
		},
	}
	c.Flags().Uint64Var(&since, "since", 0, "only records numbered above N")
	c.Flags().StringVar(&status, "status", "", "only runs with this status (OK, INVALID_INPUTS, …)")
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new records until interrupted")
	c.Flags().DurationVar(&poll, "poll", 500*time.Millisecond, "how often --follow looks for new records")
	return c
}
