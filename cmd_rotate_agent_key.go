package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newRotateAgentKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rotate-agent-key --agent OWNER/SLUG",
		Short: "Replace an agent's API key with a new one and print it",
		Long: `Replace the Agent API key of an agent - one lost, or feared leaked - with a new
one, and print it. The agent keeps its rooms, contacts and history.

The old key stops working at once; a chatd serve running on the same database
notices within a second and closes the agent's connections opened with it.
Delegated tokens the agent obtained with the old key end too; grants not yet
exchanged stay (exchanging one takes the new key). The new key is shown once:
store it now (chatd keeps only a hash).`,
		Example: `  chatd rotate-agent-key --agent alice/helper
  chatd rotate-agent-key --agent alice/helper --json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "agent"); err != nil {
				return err
			}
			f := cmd.Flags()
			handle, _ := f.GetString("agent")
			asJSON, _ := f.GetBool("json")
			handle = strings.TrimPrefix(strings.TrimSpace(handle), "@")
			ownerHandle, _, isAgent := strings.Cut(handle, "/")
			if _, err := store.ParseHandle(handle); err != nil || !isAgent {
				return usageError{errors.New("--agent must be an agent's handle, <owner>/<slug>, e.g. alice/helper")}
			}

			db, err := openStore(cmd, store.Options{})
			if err != nil {
				return err
			}
			defer db.Close()
			ctx := context.Background()
			owner, err := personByHandle(ctx, db, ownerHandle)
			if err != nil {
				return err
			}
			party, err := db.ResolveHandle(ctx, handle)
			if err != nil {
				if store.ErrorCode(err) == store.CodeNotFound {
					return fmt.Errorf("@%s has no agent with the handle %s", owner.Handle, handle)
				}
				return err
			}
			a, key, err := db.RotateAgentKey(ctx, owner, party.ID)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), asJSON,
				map[string]string{"id": a.ID, "handle": a.Handle, "api_key": key},
				fmt.Sprintf("Replaced the key of %s (@%s, id %s), owned by @%s. The old key no longer works.\n\nAgent API key - shown only now, store it somewhere safe:\n\n  %s\n\nUse it as the X-API-Key header on /api/v1/agent/* requests, or as the SDK's agent API key.\n",
					a.Name, a.Handle, a.ID, owner.Handle, key))
		},
	}
	f := cmd.Flags()
	f.String("agent", "", "the agent's handle, <owner>/<slug>, e.g. alice/helper (required)")
	f.Bool("json", false, `print one JSON object {"id", "handle", "api_key"} instead of text`)
	return cmd
}
