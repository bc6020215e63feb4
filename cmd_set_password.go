package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/chatd/chatd/store"
)

func newSetPasswordCmd() *cobra.Command {
	var handle string
	cmd := &cobra.Command{
		Use:   "set-password --user HANDLE",
		Short: "Set the password a person signs in to the web app with",
		Long: fmt.Sprintf(`Set (or replace) the password a person signs in with at
POST /api/v1/auth/sign-in. The password is read from standard input, never
from a flag (flags end up in shell history and process lists): at a terminal
chatd asks for it twice without echoing it; otherwise it reads one line.

A password is %d to %d characters; there are no other rules, so a
passphrase of a few words is a good choice. chatd stores only an argon2id
hash. Setting a password signs the person out of every session.`, store.MinPasswordLen, store.MaxPasswordLen),
		Example: `  chatd set-password --user alice
  printf '%s\n' "$NEW_PASSWORD" | chatd set-password --user alice`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "user"); err != nil {
				return err
			}
			return withStore(cmd, func(ctx context.Context, db *store.DB) error {
				// The person first: nobody types a password twice to learn
				// that the handle or the database was wrong.
				u, err := personByHandle(ctx, db, handle)
				if err != nil {
					return err
				}
				password, err := readPassword(cmd)
				if err != nil {
					return err
				}
				if err := db.SetPassword(ctx, u.ID, password); err != nil {
					if store.ErrorCode(err) == store.CodeValidation {
						return passwordUsageError()
					}
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Password set for %s (@%s). Earlier sessions were signed out.\n", u.Name(), u.Handle)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&handle, "user", "", "handle of the person (required)")
	return cmd
}

// readPassword reads the new password: from a terminal twice without echo,
// otherwise as one line of standard input.
func readPassword(cmd *cobra.Command) (string, error) {
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		ask := func(prompt string) (string, error) {
			fmt.Fprint(cmd.ErrOrStderr(), prompt)
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(cmd.ErrOrStderr())
			return string(b), err
		}
		pw, err := ask("New password: ")
		if err != nil {
			return "", err
		}
		again, err := ask("Again: ")
		if err != nil {
			return "", err
		}
		if pw != again {
			return "", usageError{errors.New("the two passwords differ; nothing was changed")}
		}
		return pw, nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", usageError{errors.New("no password on standard input: give it as one line")}
	}
	return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), nil
}

func passwordUsageError() error {
	return usageError{fmt.Errorf("the password must be %d to %d characters long", store.MinPasswordLen, store.MaxPasswordLen)}
}
