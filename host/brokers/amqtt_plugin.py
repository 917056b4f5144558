"""An amqtt topic plugin for the broker matrix: refuses subscriptions to filters under
a prefix (SUBACK 0x80) and allows everything else. amqtt's own TopicAccessControlList
plugin only lists what is allowed, per user, so it cannot say "all but one prefix".
Loaded by the amqtt broker process, by its dotted path, from amqtt.yaml."""

from dataclasses import dataclass

from amqtt.contexts import Action
from amqtt.plugins.base import BaseTopicPlugin


class DenyPrefix(BaseTopicPlugin):
    async def topic_filtering(self, *, session=None, topic=None, action=None):
        if action == Action.SUBSCRIBE:
            return not (topic or "").startswith(self.config.prefix)
        return True

    @dataclass
    class Config:
        prefix: str = "fw/denied/"
