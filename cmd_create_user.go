package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/chatd/chatd/store"
)

func newCreateUserCmd() *cobra.Command {
	var nu store.NewUser
	var withPassword, asJSON bool
	cmd := &cobra.Command{
		Use:   "create-user --handle HANDLE --name NAME",
		Short: "Create a person's account and print their API key",
		Long: `Create a human account and print a Human API key for it. The key is shown
once: store it now (chatd keeps only a hash).

The handle is how others @-mention the person: 2 to 39 letters, digits, '-',
'_' or '.', starting and ending with a letter or digit, unique regardless of
case. The first person in an organization is its admin; the organization
("default" unless --org names another) is created on first use.

With --password-stdin the person also gets a password for the web app, read
from standard input as chatd set-password reads it (at a terminal, asked
twice without echo).`,
		Example: `  chatd create-user --handle alice --name "Alice Liddell" --password-stdin
  chatd create-user --handle bob --name Bob --email bob@example.com --json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "handle", "name"); err != nil {
				return err
			}
			if err := checkNewUserFlags(nu); err != nil {
				return err
			}
			return withStore(cmd, func(ctx context.Context, db *store.DB) error {
				// Asked once the database is open: a missing or refused one
				// is said before anyone types a password.
				var password string
				if withPassword {
					var err error
					if password, err = readPassword(cmd); err != nil {
						return err
					}
					if err := store.CheckPassword(password); err != nil {
						return passwordUsageError()
					}
				}
				u, key, err := db.CreateUser(ctx, nu)
				if err != nil {
					return err
				}
				if withPassword {
					if err := db.SetPassword(ctx, u.ID, password); err != nil {
						return fmt.Errorf("%s was created, but setting the password failed (set it with chatd set-password --user %s): %w",
							u.Handle, u.Handle, err)
					}
				}
				return printNewKey(cmd, asJSON, humanKey, u.ID, u.Handle, key,
					fmt.Sprintf("Created %s (@%s, %s, id %s).", u.Name(), u.Handle, u.Role, u.ID))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&nu.Handle, "handle", "", "the person's handle, used in @-mentions (required)")
	f.StringVar(&nu.Name, "name", "", "display name, e.g. \"Alice Liddell\" (required)")
	f.StringVar(&nu.Email, "email", "", "email address (optional)")
	f.StringVar(&nu.Organization, "org", store.DefaultOrganization, "organization to join; created if it does not exist")
	f.StringVar(&nu.APIKey, "api-key", "", "adopt this existing human key (band_u_… or thnv_u_…) instead of minting a new one")
	f.BoolVar(&withPassword, "password-stdin", false, "also set the password the person signs in to the web app with, read from standard input as set-password does")
	f.BoolVar(&asJSON, "json", false, `print one JSON object {"id", "handle", "api_key"} instead of text`)
	return cmd
}

// checkNewUserFlags checks, before the database is opened, the values of
// create-user's flags that need no database, as the store checks them:
// a mistake there is one in the command line (exit status 2), and a
// refused command should not have touched the database. The store checks
// them all again, and what only it can (a reserved handle, an email of
// the .invalid domain) comes back as a usage error too (inputError).
func checkNewUserFlags(nu store.NewUser) error {
	if msg := store.ValidHandle(strings.TrimSpace(nu.Handle)); msg != "" {
		return usageError{fmt.Errorf("--handle %s", msg)}
	}
	if email := strings.TrimSpace(nu.Email); email != "" {
		if !store.IsEmailAddress(email) {
			return usageError{errors.New("--email is not a valid email address")}
		}
	}
	if nu.APIKey != "" && store.KindOfKey(nu.APIKey) != store.UserKey {
		return usageError{errors.New("--api-key must start with band_u_ or thnv_u_ followed by at least 24 letters, digits, '-' or '_'")}
	}
	return nil
}
