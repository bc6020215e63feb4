package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newRegisterAgentCmd() *cobra.Command {
	var na store.NewAgent
	var owner string
	var asJSON bool
	var limits store.Limits
	cmd := &cobra.Command{
		Use:   "register-agent --name NAME --description TEXT [--owner HANDLE]",
		Short: "Register an agent and print its API key",
		Long: `Register an external agent - one whose reasoning loop runs in your own code -
and print its Agent API key. The key is shown once: store it now (chatd keeps
only a hash).

The agent's handle is <owner>/<slug>, e.g. alice/helper; the slug is derived
from the name unless --slug gives one. --owner may be left out when exactly
one person exists. --description, what the agent does, is required: the Band
Python SDK refuses to start an agent whose profile has none.

Give the key to a Band SDK as its agent API key, with
  BAND_REST_URL=http://127.0.0.1:8080
  BAND_WS_URL=ws://127.0.0.1:8080/api/v1/socket/websocket`,
		Example: `  chatd register-agent --name "Helper" --description "Answers questions about the docs"
  chatd register-agent --owner alice --name "Research Bot" --slug research --description "Finds sources" --json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "name", "description"); err != nil {
				return err
			}
			return withStoreLimits(cmd, limits, func(ctx context.Context, db *store.DB) error {
				u, err := agentOwner(ctx, db, owner)
				if err != nil {
					return err
				}
				na.OwnerID = u.ID
				a, key, err := db.RegisterAgent(ctx, na)
				if err != nil {
					return err
				}
				return printNewKey(cmd, asJSON, agentKey, a.ID, a.Handle, key, "Registered "+agentSummary(a, u)+".")
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "handle of the person who owns the agent (optional when only one person exists)")
	f.StringVar(&na.Name, "name", "", "the agent's display name, 3 to 100 characters (required)")
	f.StringVar(&na.Slug, "slug", "", "the part of the handle after the owner's, e.g. helper (default: derived from the name)")
	f.StringVar(&na.Description, "description", "", "what the agent does, on one line, up to 500 characters (required)")
	f.StringVar(&na.Bio, "bio", "", "a longer description, up to 2000 characters")
	f.StringArrayVar(&na.Tags, "tag", nil, "a tag for the agent; repeat for several")
	f.StringVar(&na.APIKey, "api-key", "", "adopt this existing agent key (band_a_… or thnv_a_…) instead of minting a new one")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"id", "handle", "api_key"} instead of text`)
	f.IntVar(&limits.AgentsPerUser, "max-agents-per-user", store.DefaultLimits.AgentsPerUser, "quota: agents one person may own, as chatd serve's flag")
	f.IntVar(&limits.TagsPerAgent, "max-tags-per-agent", store.DefaultLimits.TagsPerAgent, "quota: tags on one agent, as chatd serve's flag")
	envFlag(f, "max-agents-per-user", "CHATD_MAX_AGENTS_PER_USER")
	envFlag(f, "max-tags-per-agent", "CHATD_MAX_TAGS_PER_AGENT")
	return cmd
}

// agentOwner finds the person --owner names, or without --owner the only
// person there is.
func agentOwner(ctx context.Context, db *store.DB, owner string) (*store.User, error) {
	if owner != "" {
		return personByHandle(ctx, db, owner)
	}
	u, err := db.OnlyUser(ctx)
	if store.ErrorCode(err) == store.CodeBadRequest {
		return nil, usageError{fmt.Errorf("%s; name the owner with --owner", describeError(err))}
	}
	return u, err
}
