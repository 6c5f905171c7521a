"""Push notifications: the receiver that syncs on the service's pushes, and its adapters."""
