"""The processor's live web dashboard (served by the Faust web server, assets bundled)."""
