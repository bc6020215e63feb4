// The person's account: who they are, and where their credentials are
// managed.

import { h } from "../dom.js";
import { pageSection } from "../ui.js";

export function mount(root, ctx) {
  const { me } = ctx;
  root.append(pageSection("Account", "Who you are signed in as.",
    h("dl", { class: "card account-facts" },
      h("dt", {}, "Name"), h("dd", {}, me.name || "—"),
      h("dt", {}, "Handle"), h("dd", {}, `@${me.handle}`),
      h("dt", {}, "Role"), h("dd", {}, me.role || "member")),
    h("p", {}, "Your Human API keys and the apps signed in as you are on the ", h("a", { href: "#/keys" }, "API keys"), " page.")));
}
