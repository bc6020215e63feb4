package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newRegisterAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "register-agent --name NAME [--owner HANDLE]",
		Short: "Register an agent and print its API key",
		Long: `Register an external agent - one whose reasoning loop runs in your own code -
and print its Agent API key. The key is shown once: store it now (chatd keeps
only a hash).

The agent's handle is <owner>/<slug>, e.g. alice/helper; the slug is derived
from the name unless --slug gives one. --owner may be left out when exactly
one person exists.

Give the key to a Band SDK as its agent API key, with
  BAND_REST_URL=http://127.0.0.1:8080
  BAND_WS_URL=ws://127.0.0.1:8080/api/v1/socket/websocket`,
		Example: `  chatd register-agent --name "Helper"
  chatd register-agent --owner alice --name "Research Bot" --slug research --description "Finds sources" --json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "name"); err != nil {
				return err
			}
			f := cmd.Flags()
			owner, _ := f.GetString("owner")
			na := store.NewAgent{}
			na.Name, _ = f.GetString("name")
			na.Slug, _ = f.GetString("slug")
			na.Description, _ = f.GetString("description")
			na.Bio, _ = f.GetString("bio")
			na.Tags, _ = f.GetStringArray("tag")
			na.APIKey, _ = f.GetString("api-key")
			asJSON, _ := f.GetBool("json")

			db, err := openStore(cmd, store.Options{})
			if err != nil {
				return err
			}
			defer db.Close()
			ctx := context.Background()
			var u *store.User
			if owner == "" {
				u, err = db.OnlyUser(ctx)
				if store.ErrorCode(err) == store.CodeBadRequest {
					return usageError{fmt.Errorf("%s; name the owner with --owner", describeError(err))}
				}
			} else {
				u, err = personByHandle(ctx, db, owner)
			}
			if err != nil {
				return err
			}
			na.OwnerID = u.ID
			a, key, err := db.RegisterAgent(ctx, na)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), asJSON,
				map[string]string{"id": a.ID, "handle": a.Handle, "api_key": key},
				fmt.Sprintf("Registered %s (@%s, id %s), owned by @%s.\n\nAgent API key - shown only now, store it somewhere safe:\n\n  %s\n\nUse it as the X-API-Key header on /api/v1/agent/* requests, or as the SDK's agent API key.\n",
					a.Name, a.Handle, a.ID, u.Handle, key))
		},
	}
	f := cmd.Flags()
	f.String("owner", "", "handle of the person who owns the agent (optional when only one person exists)")
	f.String("name", "", "the agent's display name, 3 to 100 characters (required)")
	f.String("slug", "", "the part of the handle after the owner's, e.g. helper (default: derived from the name)")
	f.String("description", "", "what the agent does, up to 500 characters")
	f.String("bio", "", "a longer description, up to 2000 characters")
	f.StringArray("tag", nil, "a tag for the agent; repeat for several")
	f.String("api-key", "", "adopt this existing agent key (band_a_… or thnv_a_…) instead of minting a new one")
	f.Bool("json", false, `print one JSON object {"id", "handle", "api_key"} instead of text`)
	return cmd
}
