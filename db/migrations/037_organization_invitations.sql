-- People join an organization by accepting an invitation with their own key. Adding someone by
-- email used to make any user of the installation a member at once (without their consent) and
-- answered with their name; an invitation says nothing about whether the address belongs to a
-- user, and is only an address until its owner accepts. One pending invitation per address and
-- organization (inviting again changes its role); accepting or declining removes it.
CREATE TABLE organization_invitations (
  id              text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  email           text NOT NULL,
  role            text NOT NULL CHECK (role IN ('Admin', 'Developer')),
  invited_by      text REFERENCES users(id) ON DELETE SET NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX organization_invitations_one_per_address
  ON organization_invitations (organization_id, lower(email));
-- An invitee lists theirs by their address.
CREATE INDEX organization_invitations_by_address ON organization_invitations (lower(email));
