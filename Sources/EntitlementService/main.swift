// Placeholder entry point; replaced by the runtime's command dispatch.
print("entitlement-service")
