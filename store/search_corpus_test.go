package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// searchCorpus makes chat messages for the search benchmark and the
// tokenizer measurements: the sentences of chatd's own manual (technical
// English with identifiers, paths, flags and numbers, as people and agents
// write about software), some in other languages with accents and CJK, and
// tool calls and results with JSON and log lines. Deterministic for a seed.
type searchCorpus struct {
	rng       *rand.Rand
	sentences []string
}

// foreignSentences are the corpus's lines in other languages.
var foreignSentences = []string{
	"Le déploiement de la version 7 a échoué à cause du café renversé sur le serveur.",
	"Können wir die Größe der Datenbank prüfen, bevor wir die Übersetzung hochladen?",
	"La señora Muñoz pidió la revisión del código para mañana por la mañana.",
	"Não é possível acessar a configuração; verifique a conexão e tente novamente.",
	"デプロイは完了しました。ログを確認してください。",
	"检索索引已经更新，请重新运行测试。",
	"Проверьте журнал ошибок после перезапуска сервера.",
	"Çalışma alanı güncellendi; lütfen değişiklikleri gözden geçirin.",
}

var (
	markdownNoise = regexp.MustCompile("[`*#|>\\[\\]]+|\\]\\([^)]*\\)")
	sentenceEnd   = regexp.MustCompile(`([.!?])\s+`)
)

func newSearchCorpus(t testing.TB, seed uint64) *searchCorpus {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../README.md", "../docs/*.md", "../docs/api/*.md", "../CONTRIBUTING.md"} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	c := &searchCorpus{rng: rand.New(rand.NewPCG(seed, 7))}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, para := range strings.Split(string(b), "\n\n") {
			if strings.HasPrefix(para, "```") {
				continue
			}
			text := strings.Join(strings.Fields(markdownNoise.ReplaceAllString(para, " ")), " ")
			for _, s := range strings.Split(sentenceEnd.ReplaceAllString(text, "$1\n"), "\n") {
				if len(strings.Fields(s)) >= 4 {
					c.sentences = append(c.sentences, s)
				}
			}
		}
	}
	if len(c.sentences) < 500 {
		t.Fatalf("the corpus found %d sentences in the manual", len(c.sentences))
	}
	return c
}

// message returns a message's type and content: mostly text of one to
// three sentences, some thoughts, tool calls and results.
func (c *searchCorpus) message() (typ, content string) {
	switch n := c.rng.IntN(100); {
	case n < 8:
		return "tool_call", fmt.Sprintf(`{"tool": "grep", "args": {"pattern": %q, "path": "store/"}}`, c.word())
	case n < 16:
		return "tool_result", fmt.Sprintf("store/messages.go:%d: %s\nexit status %d", c.rng.IntN(900), c.sentence(), c.rng.IntN(3))
	case n < 26:
		return "thought", c.sentence()
	case n < 29:
		return "text", foreignSentences[c.rng.IntN(len(foreignSentences))]
	}
	var parts []string
	for range 1 + c.rng.IntN(3) {
		parts = append(parts, c.sentence())
	}
	return "text", strings.Join(parts, " ")
}

func (c *searchCorpus) sentence() string { return c.sentences[c.rng.IntN(len(c.sentences))] }

func (c *searchCorpus) word() string {
	words := strings.Fields(c.sentence())
	return strings.Trim(words[c.rng.IntN(len(words))], ".,;:()\"'")
}
