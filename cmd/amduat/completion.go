package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/conformance"
)

func init() {
	addCommand(newCompletionCmd)
	addCommand(newDocsCmd)
}

// versionLine is the text of `amduat version` and `amduat --version`.
func versionLine() string {
	return fmt.Sprintf("amduat %s (%s, vectors %s)", moduleVersion(), runtime.Version(), conformance.Format)
}

// setVersionFlag gives the root command --version, printing the text of
// `amduat version`.
func setVersionFlag(root *cobra.Command) {
	root.Version = moduleVersion()
	root.SetVersionTemplate(versionLine() + "\n")
}

func newCompletionCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:       "completion bash|zsh|fish|powershell",
		Short:     "Print a shell completion script",
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Long: `Print the completion script of a shell on stdout. Load it with, e.g.:

  source <(amduat completion bash)                       # bash, this shell
  amduat completion bash > /etc/bash_completion.d/amduat # bash, every shell
  amduat completion zsh > "${fpath[1]}/_amduat"           # zsh
  amduat completion fish > ~/.config/fish/completions/amduat.fish

With --json: {"shell", "script"}.`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			var buf bytes.Buffer
			var err error
			switch args[0] {
			case "bash":
				err = root.GenBashCompletionV2(&buf, true)
			case "zsh":
				err = root.GenZshCompletion(&buf)
			case "fish":
				err = root.GenFishCompletion(&buf, true)
			case "powershell":
				err = root.GenPowerShellCompletionWithDesc(&buf)
			default:
				return usagef("shell %q: want bash, zsh, fish or powershell", args[0])
			}
			if err != nil {
				return fail(exitIO, args[0], err)
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Shell  string `json:"shell"`
					Script string `json:"script"`
				}{args[0], buf.String()})
			}
			if _, err := a.stdout.Write(buf.Bytes()); err != nil {
				return fail(exitIO, "stdout", err)
			}
			return nil
		},
	}
	return c
}

type docsResult struct {
	Format string   `json:"format"`
	Files  []string `json:"files"`
}

func newDocsCmd(a *app) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "docs DIR [--format markdown|man]",
		Short: "Generate the command reference (Markdown or man pages) from the command tree",
		Long: `Write one file per command into DIR (created if missing): Markdown pages
(amduat.md, amduat_put.md, …; the default) or man pages in section 1
(amduat.1, amduat-put.1, …), generated from the same help text that --help
prints. Text: "wrote N files to DIR".
JSON: {"format", "files": [PATH...]}.`,
		Args: rangeArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := args[0]
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fail(exitIO, dir, unwrapPathError(err))
			}
			root := c.Root()
			root.DisableAutoGenTag = true
			var err error
			switch format {
			case "markdown", "md":
				format = "markdown"
				err = writeMarkdownTree(root, dir)
			case "man":
				err = writeManTree(root, dir, "amduat "+moduleVersion())
			default:
				return usagef("--format %q: want markdown or man", format)
			}
			if err != nil {
				return fail(exitIO, dir, err)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				return fail(exitIO, dir, unwrapPathError(err))
			}
			res := docsResult{Format: format, Files: []string{}}
			for _, e := range ents {
				res.Files = append(res.Files, filepath.Join(dir, e.Name()))
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			a.printf("wrote %d files to %s\n", len(res.Files), dir)
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "markdown", "markdown or man")
	return c
}
