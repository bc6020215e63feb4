package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/server"
	"github.com/chatd/chatd/store"
)

func newTokenCmd() *cobra.Command {
	var handle string
	var ttl time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "token --user HANDLE",
		Short: "Print a short-lived bearer token for a person",
		Long: `Print a bearer token (a JWT) that authenticates a person on the Human API as
"Authorization: Bearer <token>", as an alternative to their API key. It expires
after --ttl (from 1s to 720h). Tokens are signed with a secret kept in the
database, so they stop working if the database is replaced.`,
		Example: `  curl -H "Authorization: Bearer $(chatd token --user alice)" http://127.0.0.1:8080/api/v1/me`,
		Args:    exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "user"); err != nil {
				return err
			}
			if ttl < time.Second || ttl > server.MaxTokenTTL {
				return usageError{fmt.Errorf("--ttl must be between 1s and %s", server.MaxTokenTTL)}
			}
			return withStore(cmd, func(ctx context.Context, db *store.DB) error {
				u, err := personByHandle(ctx, db, handle)
				if err != nil {
					return err
				}
				secret, err := db.ServerSecret(ctx)
				if err != nil {
					return err
				}
				now := time.Now()
				token, err := server.IssueUserToken(secret, u.ID, ttl, now)
				if err != nil {
					return err
				}
				return printResult(cmd.OutOrStdout(), asJSON,
					map[string]string{"id": u.ID, "handle": u.Handle, "token": token, "expires_at": now.Add(ttl).UTC().Format(time.RFC3339)},
					token+"\n")
			})
		},
	}
	cmd.Flags().StringVar(&handle, "user", "", "handle of the person (required)")
	cmd.Flags().DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid (from 1s to 720h)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print one JSON object {"id", "handle", "token", "expires_at"}`)
	return cmd
}
