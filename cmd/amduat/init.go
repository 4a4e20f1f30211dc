package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
	"github.com/amduat/amduat/asl/s3store"
)

func init() { addCommand(newInitCmd) }

// hashFlag parses --hash (sha256 | blake3 | a registry name).
func hashFlag(name string) (asl.HashAlgorithm, error) {
	alg, err := asl.HashByName(name)
	if err != nil {
		return asl.HashAlgorithm{}, usagef("--hash %q: want sha256 or blake3", name)
	}
	return alg, nil
}

type initResult struct {
	Store  string `json:"store"`
	Hash   string `json:"hash"`
	HashID uint16 `json:"hash_id"`
}

func newInitCmd(a *app) *cobra.Command {
	var hashName string
	c := &cobra.Command{
		Use:   "init [--hash sha256|blake3]",
		Short: "Create a store at --store",
		Long: `Create an empty store in the --store directory (created if missing; it must
be empty). --hash chooses the hash new artifacts are put under by default
(sha256 = HASH-ASL1-256, the mandatory default; blake3 = BLAKE3-256, faster
for large artifacts). Fails with exit code 7 if a store exists there already,
or --store is a file or a non-empty directory.`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkStoreValue(a.storeDir); err != nil {
				return err
			}
			if isRemote(a.storeDir) {
				return usagef("--store %s is a server: a served store is created where it lives (amduat init --store DIR, then amduat serve --store DIR)", a.storeDir)
			}
			alg, err := hashFlag(hashName)
			if err != nil {
				return err
			}
			if isS3(a.storeDir) {
				// As for a directory, init refuses a store that exists
				// (exit 7); s3store.Create itself accepts one of the same
				// hash, so that concurrent inits are safe.
				if s, err := a.openS3(false, 0); err == nil {
					s.Close()
					return fail(exitStore, a.storeDir, &explained{"a store exists here already", s3store.ErrExists})
				} else if !errors.Is(err, s3store.ErrNoStore) {
					return err
				}
				s, err := a.openS3(true, alg.ID)
				if err != nil {
					return err
				}
				s.Close()
				if a.jsonOut {
					return a.printJSON(initResult{Store: a.storeDir, Hash: alg.Short, HashID: uint16(alg.ID)})
				}
				a.printf("initialized store %s (hash %s)\n", a.storeDir, alg.Short)
				return nil
			}
			// A file, or a directory holding something other than a
			// store, is not a place for one: exit 7, as --store naming a
			// file is for every other command (SPECS.md §16.2).
			st, serr := os.Stat(a.storeDir)
			if serr == nil && !st.IsDir() {
				return fail(exitStore, a.storeDir, errors.New("is a file, not a directory (init needs a new or empty directory)"))
			}
			nonEmpty := false
			if serr == nil {
				ents, _ := os.ReadDir(a.storeDir)
				nonEmpty = len(ents) > 0
			}
			s, err := pebblestore.Create(a.storeDir, &pebblestore.Options{DefaultHash: alg.ID})
			if errors.Is(err, pebblestore.ErrExists) {
				return fail(exitStore, a.storeDir, &explained{"a store exists here already", pebblestore.ErrExists})
			}
			if err != nil && nonEmpty {
				return fail(exitStore, a.storeDir, &explained{"not empty and holds no store (init needs a new or empty directory)", err})
			}
			if err != nil {
				return failAuto(a.storeDir, err)
			}
			if err := s.Close(); err != nil {
				return failAuto(a.storeDir, err)
			}
			if a.jsonOut {
				return a.printJSON(initResult{Store: a.storeDir, Hash: alg.Short, HashID: uint16(alg.ID)})
			}
			a.printf("initialized store %s (hash %s)\n", a.storeDir, alg.Short)
			return nil
		},
	}
	c.Flags().StringVar(&hashName, "hash", "sha256", "default hash for new artifacts: sha256 or blake3")
	return c
}
