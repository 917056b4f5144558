"""Over-the-air updates: releases and their manifests, the update service that offers them
to boards, and staged rollouts gated by the fleet report."""
