// The API reference: Swagger UI rendering the document this server serves,
// so the reference always matches the running binary. No validator badge:
// it would send the document to an outside service. "Try it out" sends
// requests to this server only, with the credentials the reader enters.
window.SwaggerUIBundle({
  url: "/api/v1/openapi.json",
  domNode: document.getElementById("apiref"),
  deepLinking: true,
  validatorUrl: null,
  docExpansion: "none",
  defaultModelsExpandDepth: 0,
  displayOperationId: false,
  filter: true,
  showExtensions: true,
});
