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
	var handle string
	var asJSON bool
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
			handle = strings.TrimPrefix(strings.TrimSpace(handle), "@")
			ownerHandle, _, isAgent := strings.Cut(handle, "/")
			if _, err := store.ParseHandle(handle); err != nil || !isAgent {
				return usageError{errors.New("--agent must be an agent's handle, <owner>/<slug>, e.g. alice/helper")}
			}
			return withStore(cmd, func(ctx context.Context, db *store.DB) error {
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
				return printNewKey(cmd, asJSON, agentKey, a.ID, a.Handle, key,
					"Replaced the key of "+agentSummary(a, owner)+". The old key no longer works.")
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&handle, "agent", "", "the agent's handle, <owner>/<slug>, e.g. alice/helper (required)")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"id", "handle", "api_key"} instead of text`)
	return cmd
}
