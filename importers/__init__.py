"""Front ends that lower model formats into the aot IR (installed as `aot.importers`)."""
