package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
)

func init() { addCommand(newSalvageCmd) }

type salvageLoss struct {
	Ref   asl.Reference `json:"ref"`
	Error string        `json:"error"`
}

type salvageResult struct {
	From      string        `json:"from"`
	To        string        `json:"to"`
	Hash      string        `json:"hash"`
	HashID    uint16        `json:"hash_id"`
	Artifacts int64         `json:"artifacts"`
	Bytes     int64         `json:"bytes"`
	FromPacks int64         `json:"from_packs"`
	Entries   int64         `json:"entries"`
	Lost      []salvageLoss `json:"lost"`
	Damage    []string      `json:"damage"`
}

func newSalvageCmd(a *app) *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "salvage --to DIR",
		Short: "Copy what can still be read from a damaged store into a new one",
		Long: `Read every artifact of the store at --store that can still be read and
verified, and copy it into a new store created in DIR (which must not exist
or be empty), with the same default hash. It works when the store no longer
opens (a damaged MANIFEST, OPTIONS file, log or table): it reads the pack
files record by record, skipping damaged bytes, then whatever of Pebble's
index still reads (artifacts of stores written before format version 3 live
there), then the index entries. Every byte copied is verified against its
reference. The store at --store is only read.

Each artifact that the damaged store names but that could not be read is
reported on stderr ("REF: cause"), and so is each damaged region (file and
byte or key range). Summary on stdout:

  salvaged N artifacts (B bytes) into DIR: L lost, D damaged regions

Then replace the damaged store by DIR (for example: mv store store.damaged;
mv DIR store). A progress bar is drawn on stderr when stderr is a terminal.

Exit 0 when everything was copied and no damage was found, 4 when an
artifact was lost or damage found (DIR holds everything that could be read),
7 when --store holds no store or DIR holds one already, 6 on other errors
(DIR cannot be written).`,
		Example: `  amduat salvage --to /srv/store.salvaged
  amduat --json salvage --to ./rescued`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if to == "" {
				return usagef("--to DIR is required")
			}
			if abs1, err1 := filepath.Abs(to); err1 == nil {
				if abs2, err2 := filepath.Abs(a.storeDir); err2 == nil && abs1 == abs2 {
					return usagef("--to %s is the store being salvaged", to)
				}
			}
			if st, err := os.Stat(to); err == nil && !st.IsDir() {
				return fail(exitStore, to, errors.New("is a file, not a directory (salvage needs a new or empty directory)"))
			}
			var bar *progressBar
			var progress func(pebblestore.SalvageProgress)
			if a.stderrIsTerminal() {
				progress = func(p pebblestore.SalvageProgress) {
					if bar == nil {
						bar = newProgressBar(a.stderr, "salvage", max(p.TotalBytes, 1), true)
					}
					bar.set(p.Bytes)
				}
			}
			rep, err := pebblestore.Salvage(c.Context(), a.storeDir, to, nil, progress)
			if bar != nil {
				bar.finish()
			}
			switch {
			case errors.Is(err, pebblestore.ErrNoStore):
				return fail(exitStore, a.storeDir, fmt.Errorf("nothing of a store here: %w", err))
			case errors.Is(err, pebblestore.ErrExists):
				return fail(exitStore, to, &explained{"not empty (salvage needs a new or empty directory)", err})
			case err != nil:
				return failAuto(to, err)
			}
			res := salvageResult{From: a.storeDir, To: to, HashID: uint16(rep.Hash), Artifacts: rep.Artifacts, Bytes: rep.Bytes,
				FromPacks: rep.FromPacks, Entries: rep.Entries, Lost: []salvageLoss{}, Damage: []string{}}
			if alg, ok := asl.LookupHash(rep.Hash); ok {
				res.Hash = alg.Short
			}
			for _, l := range rep.Lost {
				res.Lost = append(res.Lost, salvageLoss{Ref: l.Ref, Error: oneLine(l.Err.Error())})
				a.warnf(l.Ref.String(), l.Err)
			}
			for _, d := range rep.Damage {
				res.Damage = append(res.Damage, oneLine(d.Error()))
				a.warnf(a.storeDir, d)
			}
			if a.jsonOut {
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				a.printf("salvaged %d artifacts (%d bytes) into %s: %d lost, %d damaged regions\n",
					res.Artifacts, res.Bytes, to, len(res.Lost), len(res.Damage))
			}
			if len(res.Lost) > 0 || len(res.Damage) > 0 {
				return exitStatus(exitIntegrity)
			}
			return nil
		},
	}
	c.Flags().StringVar(&to, "to", "", "directory of the new store (must not exist or be empty)")
	return c
}
