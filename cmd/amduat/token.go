package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/server"
)

func init() { addCommand(newTokenCmd) }

func newTokenCmd(a *app) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage the bearer tokens of amduat serve (add, list, revoke)",
		Long: `A token file (amduat serve --auth-file FILE; SPECS.md §18.7) holds one entry per
token: its name, the SHA-256 of its text and its scopes: read (get, has,
stat, list, show, provenance, metrics, plan status and log), write (put,
build, plan build), run (pel run, pel verify, plan verify), admin (pin, rm
and gc against the server; SPECS.md §18.10), plan (submit, cancel and retry
plans, whose effects call the world through the server's policy) and
approve (approve and reject a plan's gates; the token's name is recorded
as who decided; SPECS.md §18.12). A token that may run programs may not
thereby call the world: plan is separate from run. Scopes are independent: give an admin token read too when it should read
(--scope read,admin). The text of a token is printed once, by add, and never stored.
A running server reads the file again when it changes, so add and revoke
take effect within a second. Clients send the token from AMDUAT_TOKEN.`,
	}
	cmd.PersistentFlags().StringVar(&file, "auth-file", "", "the token file (required)")
	need := func() error {
		if file == "" {
			return usagef("--auth-file FILE is required")
		}
		return nil
	}
	var scopes string
	add := &cobra.Command{
		Use:   "add NAME --scope read,write,run,admin,plan,approve",
		Short: "Create a token and print its text (once)",
		Args:  rangeArgs(1, 1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := need(); err != nil {
				return err
			}
			tok, err := server.AddToken(file, args[0], strings.Split(scopes, ","))
			if err != nil {
				return fail(exitUsage, file, err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Name   string   `json:"name"`
					Token  string   `json:"token"`
					Scopes []string `json:"scopes"`
				}{args[0], tok, strings.Split(scopes, ",")})
			}
			a.printf("%s\n", tok)
			return nil
		},
	}
	add.Flags().StringVar(&scopes, "scope", "read", "comma-separated scopes: read, write, run, admin, plan, approve")
	list := &cobra.Command{
		Use:   "list",
		Short: "List token names and scopes",
		Args:  rangeArgs(0, 0),
		RunE: func(_ *cobra.Command, _ []string) error {
			if err := need(); err != nil {
				return err
			}
			ts, err := server.ListTokens(file)
			if err != nil {
				return fail(exitIO, file, err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Tokens []server.TokenEntry `json:"tokens"`
				}{ts})
			}
			for _, t := range ts {
				a.printf("%s\t%s\tsha256:%.12s…\n", t.Name, strings.Join(t.Scopes, ","), t.SHA256)
			}
			return nil
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Remove a token",
		Args:  rangeArgs(1, 1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := need(); err != nil {
				return err
			}
			if err := server.RevokeToken(file, args[0]); err != nil {
				return fail(exitUsage, file, err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Revoked string `json:"revoked"`
				}{args[0]})
			}
			a.printf("revoked %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(add, list, revoke)
	return cmd
}
