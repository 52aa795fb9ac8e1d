// Starts Swagger UI on the local bundle (a file, not an inline script, so the page's
// Content-Security-Policy can forbid inline scripts).
"use strict";
(function () {
  var node = document.getElementById("swagger-ui");
  window.ui = window.SwaggerUIBundle({
    url: node.getAttribute("data-spec-url"),
    dom_id: "#swagger-ui",
    deepLinking: true,
    showExtensions: true,
    // The default validator badge is an image from another origin.
    validatorUrl: null,
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
})();
