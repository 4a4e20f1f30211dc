package main

import (
	"github.com/spf13/cobra"

	"github.com/amduat/amduat/surf"
)

func init() { addPELCommand(newPELCacheCmd) }

func newPELCacheCmd(a *app) *cobra.Command {
	cache := &cobra.Command{
		Use:   "cache",
		Short: "Manage the action cache of pel run",
	}
	var set string
	var setGiven bool
	salt := &cobra.Command{
		Use:   "salt [--set TEXT]",
		Short: "Print the action cache salt, or replace it (disowning every cached entry)",
		Long: `The action cache key of a run includes the store's salt (SPECS.md §14.6).
Without --set, print the current salt (empty when never set). With --set TEXT,
replace it: every entry recorded under another salt is no longer found, so
later runs execute again and record fresh entries. This is the remedy for a
poisoned cache, e.g. after changing an operation's behaviour without giving it
a new version.`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) (err error) {
			setGiven = c.Flags().Changed("set")
			s, err := a.openStore()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			if setGiven {
				if err := surf.SetSalt(c.Context(), s, []byte(set)); err != nil {
					return failAuto(a.storeDir, err)
				}
			}
			cur, err := surf.Salt(c.Context(), s)
			if err != nil {
				return failAuto(a.storeDir, err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Salt    string `json:"salt"`
					Changed bool   `json:"changed"`
				}{string(cur), setGiven})
			}
			a.printf("salt %q\n", cur)
			return nil
		},
	}
	salt.Flags().StringVar(&set, "set", "", "replace the salt with TEXT")
	cache.AddCommand(salt)
	return cache
}
