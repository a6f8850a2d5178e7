"""Deploy: chart values derived from the stack config, the Pulumi program, and the offline render."""
